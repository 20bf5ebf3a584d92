"""`capsule plan new | cost`: write a study's plan for a model card's IFEval claim; price a sealed plan."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.authoring.new_plan import NewPlanRequest, new_plan
from capsule.commands.options import ledger_option
from capsule.costing.cost_lines import device_lines
from capsule.costing.devices import device_table
from capsule.costing.pricing import plan_cost_lines
from capsule.errors import BadInputError
from capsule.prereg.metrics import ALL_METRICS
from capsule.prereg.plan import DTYPES


@click.group()
def plan() -> None:
    """Write plans (the standard study of a model card's claim) and price sealed ones."""


@plan.command("new")
@click.argument("name")
@click.option(
    "--model",
    "model",
    required=True,
    help="A local model directory, or a hub id with its revision: org/name@commit.",
)
@click.option(
    "--claim", "claim_value", type=float, required=True, help="The card's IFEval number, in percent."
)
@click.option(
    "--reading", required=True, help=f"The metric the card's number is read as: {', '.join(ALL_METRICS)}."
)
@click.option("--source", required=True, help="Where the card makes the claim (its URL).")
@click.option(
    "--claim-text", default="", help="The claim in the card's words (default: made from the above)."
)
@click.option(
    "--tok-per-s",
    "tokens_per_s",
    type=float,
    default=None,
    help="Generation throughput to size the plan with (default for a local model: a short probe).",
)
@click.option(
    "--budget-minutes", type=float, default=120.0, show_default=True, help="Size the contrasts to fit."
)
@click.option("--max-new-tokens", type=int, default=1280, show_default=True, help="Every arm's token budget.")
@click.option("--batch-size", type=int, default=16, show_default=True, help="The claim arm's batch size.")
@click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default=None,
    help="The model's dtype (default: config.json's).",
)
@click.option(
    "--prereg",
    "prereg_root",
    type=click.Path(path_type=Path),
    default=Path("prereg"),
    show_default=True,
    help="Where plans live (the plan goes to PREREG/NAME/).",
)
def new(
    name: str,
    model: str,
    claim_value: float,
    reading: str,
    source: str,
    claim_text: str,
    tokens_per_s: float | None,
    budget_minutes: float,
    max_new_tokens: int,
    batch_size: int,
    dtype: str | None,
    prereg_root: Path,
) -> None:
    """Write PREREG/NAME/ (plan.toml, rationale.md, controls/) and print what the plan will cost."""
    request = NewPlanRequest(
        name,
        model,
        claim_value,
        reading,
        source,
        claim_text,
        tokens_per_s,
        budget_minutes,
        max_new_tokens,
        batch_size,
        dtype,
        prereg_root,
    )
    written = new_plan(request, lambda line: click.echo(line, err=True))
    for note in written.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"wrote {written.directory}/: plan.toml, rationale.md, controls/compliant.jsonl")
    click.echo(f"sized at {written.throughput}; every figure an upper bound (each response at its budget)")
    click.echo(f"{'arm':<28} {'prompts':>7} {'tokens':>12} {'minutes':>8}")
    for cost in written.costs:
        click.echo(f"{cost.arm:<28} {cost.prompts:>7} {cost.tokens:>12,} {cost.minutes:>8.1f}")
    tokens, minutes = sum(c.tokens for c in written.costs), sum(c.minutes for c in written.costs)
    click.echo(f"{'total':<28} {'':>7} {tokens:>12,} {minutes:>8.1f}")
    click.echo(
        f"next: edit {written.directory}/plan.toml and rationale.md, then "
        f'`capsule prereg seal {written.directory} --note "..."`'
    )


@plan.command("cost")
@click.argument("plan_path", metavar="PLAN", type=click.Path(path_type=Path), required=False)
@click.option("--gpu", default=None, help="Device to price on (default: this host's); `--gpu help`: all.")
@click.option("--lanes", type=int, default=1, show_default=True, help="Arms run side by side.")
@click.option(
    "--gpu-count",
    type=int,
    default=1,
    show_default=True,
    help="GPUs on the host (an arm pinned to cuda:K needs K < this; lanes may use one GPU each).",
)
@ledger_option()
def cost(plan_path: Path | None, gpu: str | None, lanes: int, gpu_count: int, ledger_path: Path) -> None:
    """Print what a sealed PLAN costs on a device: per arm, tokens expected and at most, throughput,
    minutes and the arithmetic; then the total, sequential and with lanes (which arms in which lane,
    the critical path), and every figure's source."""
    if gpu_count < 1:
        raise BadInputError(f"--gpu-count {gpu_count}: at least 1")
    if gpu == "help":
        lines = device_lines(device_table())
    elif plan_path is None:
        raise BadInputError("name a sealed PLAN to price (or `--gpu help` for the device table)")
    else:
        lines = plan_cost_lines(plan_path, ledger_path, gpu, lanes, gpu_count)
    for line in lines:
        click.echo(line)
