"""`capsule reproduce [--plan DIR]`: run a sealed plan end to end (the embedded default by default).

Each option is declared once, here: its parameter is named as its field of
`capsule.pipeline.reproduce.ReproduceOptions`, which receives them as they are (`--no-progress` is
the one inverted, into `progress`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from capsule.commands.options import endpoint_options, ledger_option, plan_option, results_option
from capsule.costing.pricing import gpu_cost_lines
from capsule.pipeline.lanes import LaneOptions, parse_gpus
from capsule.pipeline.probe_run import probe_banner
from capsule.pipeline.rehearsal import REHEARSAL_BANNER
from capsule.pipeline.reproduce import ReproduceOptions, default_results_root
from capsule.pipeline.reproduce import reproduce as run_plan
from capsule.report.document import headline_line


@click.command()
@plan_option("Plan directory (or its plan.toml); it must be sealed in the ledger.", embedded_default=True)
@ledger_option()
@results_option(
    "Runs go to RESULTS/<plan>/<run_id>/ (default: results; runs/dry-run for --dry-run, "
    "runs/rehearsal for --rehearse).",
    default=None,
)
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Resume or create exactly this run directory.",
)
@click.option("--fresh", is_flag=True, help="Start a new run even if an unfinished one of this plan exists.")
@click.option("--dry-run", is_flag=True, help="Walk every arm and control with the fake backend (no model).")
@click.option(
    "--rehearse",
    is_flag=True,
    help="Run every arm on the real backends with a stand-in model of the plan's architecture (random "
    "weights, a few prompts and tokens per arm), here, before a GPU run; never recorded in the ledger.",
)
@click.option(
    "--probe",
    type=click.IntRange(min=1),
    default=None,
    help="Run every arm as sealed on its first K prompts with the real model, then price the full study "
    "on this host from the step times measured (the first GPU hour); never recorded in the ledger. "
    "With --rehearse: on the stand-in model.",
    metavar="K",
)
@click.option(
    "--model-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Local model directory (hub models); verified against the plan's checksums.",
)
@click.option(
    "--prompts",
    "prompts_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Your own IFEval input_data.jsonl (verified by sha256).",
)
@click.option(
    "--key",
    "signing_key",
    type=click.Path(path_type=Path),
    default=None,
    help="Ed25519 private key to sign with (default: $CAPSULE_SIGNING_KEY, then the user key).",
)
@click.option("--no-progress", is_flag=True, help="No progress bars.")
@click.option(
    "--retry-refused",
    is_flag=True,
    help="Resuming: load the backend again for arms it refused before (default: keep the refusal).",
)
@click.option("--lanes", type=int, default=1, show_default=True,
              help="Run up to this many arms at once, each lane a Ray task (docs/lanes.md).")
@click.option("--gpus", default=None, help="Lanes on these GPUs, one per lane in turn (NVML indices: 0,1).")
@click.option("--cluster", default=None, metavar="HOST:PORT",
              help="Run the lanes on this Ray cluster instead of a Ray on this host (docs/cluster.md).")
@endpoint_options
def reproduce(
    results_root: Path | None, no_progress: bool, lanes: int, gpus: str | None, cluster: str | None,
    **given: Any,
) -> None:
    """Run a sealed plan: every arm and control, scores, statistics, report, signed bundle."""
    given["probe"] = probe = given["probe"] or 0  # 0: not a probe
    dry_run, rehearse = given["dry_run"], given["rehearse"]
    if dry_run and rehearse:
        raise click.UsageError("--dry-run and --rehearse exclude each other: choose one")
    if probe and dry_run:
        raise click.UsageError("--probe measures real backends; a dry run has none: leave out --dry-run")
    if probe and (lanes != 1 or gpus is not None or cluster is not None):
        raise click.UsageError(
            "--probe times every backend load in one process: leave out --lanes, --gpus and --cluster "
            "(`capsule plan cost --lanes N` prices lanes)"
        )
    if rehearse and (given["model_dir"] is not None or given["endpoint"] is not None):
        raise click.UsageError(
            "--rehearse runs its own stand-in model on backends it launches: "
            "leave out --model-dir and --endpoint"
        )
    root = results_root if results_root is not None else default_results_root(dry_run, rehearse, bool(probe))
    options = ReproduceOptions(
        results_root=root, progress=not no_progress, lanes=LaneOptions(lanes, parse_gpus(gpus), cluster),
        **given,
    )
    if dry_run:
        click.echo(
            "DRY RUN: every arm on the fake backend, with no model; its verdicts will be of fake data, "
            "and it is not recorded in the ledger.", err=True,
        )
    elif probe or rehearse:
        click.echo(probe_banner(probe) if probe else REHEARSAL_BANNER, err=True)
    else:
        for line in gpu_cost_lines(options.plan_path, options.ledger_path):
            click.echo(line, err=True)
    result = run_plan(options, say=lambda line: click.echo(line, err=True))
    headline = result.headline
    if result.failed_controls:
        click.echo(f"FAILED CONTROLS: {', '.join(result.failed_controls)}")
    for reading in headline.readings:
        click.echo(headline_line(reading))
    click.echo(f"run: {result.run_dir}")
    if dry_run:
        click.echo(
            "DRY RUN: the verdicts above are of fake data (the fake backend, no model), not of the model; "
            "this run is not in the ledger, and `capsule verify` refuses it"
        )
        return
    if result.probe is not None:
        for line in result.probe.lines:
            click.echo(line)
        click.echo(
            f"{probe_banner(probe)} The cost above is the full study's on this host, from the step times "
            f"of {len(result.probe.measured.arms)} arm(s) and {len(result.probe.measured.loads)} "
            f"backend load(s) it measured (probe.json)."
            + (f" Not run here, so priced from the table alone: {', '.join(result.probe.not_run)}."
               if result.probe.not_run else "")
        )
        return
    if rehearse:
        click.echo(
            f"{REHEARSAL_BANNER} Its signature and files verify without the ledger "
            f"(capsule.evidence.verify.verify_run with ledger_path=None); `capsule verify` refuses it"
        )
        return
    click.echo(f"verify: {result.verify_command}")
    reference = result.reference
    if reference is not None:
        click.echo(f"reference: {reference.reference} (the committed run of this plan); this run against it:")
        for line in reference.lines:
            click.echo(f"  {line}")
        if reference.file is not None:
            click.echo(f"comparison: {reference.file} (check it with `{reference.check_command}`)")
