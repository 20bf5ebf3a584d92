"""`capsule doctor [--plan DIR]`: a preflight of what a plan needs against what this host has."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.commands.options import ledger_option, plan_option, results_option


@click.command()
@plan_option("Plan directory (or its plan.toml).", embedded_default=True)
@click.option("--model-dir", type=click.Path(path_type=Path), default=None,
              help="Local model directory (hub models); default $CAPSULE_MODELS/<repo name>.")
@click.option("--prompts", "prompts_path", type=click.Path(path_type=Path), default=None,
              help="Your own IFEval input_data.jsonl instead of the cached one.")
@results_option("Where runs will be written (its free disk space is checked).")
@click.option("--lanes", type=int, default=None,
              help="Also check that many lanes' arms fit one device at once (reproduce --lanes).")
@ledger_option("The ledger the plan must be sealed in (verified; an unsealed plan is one MISSING line).")
@click.pass_context
def doctor(ctx: click.Context, plan_path: Path, model_dir: Path | None, prompts_path: Path | None,
           results_root: Path, lanes: int | None, ledger_path: Path) -> None:
    """Check the seal, GPU, memory per arm, CUDA/vLLM, weights, prompts and disk before a long run.

    Exit 0 when everything the plan needs is here, 2 otherwise (one MISSING line per missing thing).
    Memory figures are estimates: weights + KV cache for batch x (prompt + new tokens) + an overhead.
    """
    from capsule.machine.doctor import run_doctor
    from capsule.machine.doctor_facts import open_for_doctor

    plan, seal = open_for_doctor(plan_path, ledger_path)
    report = run_doctor(
        plan, model_dir=model_dir, prompts_path=prompts_path, results_root=results_root, lanes=lanes,
        seal=seal,
    )
    click.echo(f"plan {plan.name}: {len(plan.arms)} arms, model {plan.model.name}")
    for finding in report.findings:
        click.echo(finding.line())
    if report.missing:
        click.echo(f"doctor: {len(report.missing)} missing; fix the MISSING lines above first.", err=True)
        ctx.exit(2)
    click.echo("doctor: everything this plan needs is here.")
