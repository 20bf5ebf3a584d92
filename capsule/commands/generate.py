"""`capsule generate`: one arm of a sealed plan, or an ad-hoc arm with no plan, into a run directory
(`capsule.pipeline.generate` opens or resumes it and generates the arm).

Each option is declared once, here: its parameter is named as its field of
`capsule.pipeline.generate.GenerateRequest` or, for an ad-hoc arm's settings,
`capsule.prereg.adhoc.AdhocOptions` (`--no-progress` is the one inverted, into `progress`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from capsule.commands.options import endpoint_options, ledger_option, plan_option
from capsule.errors import BadInputError
from capsule.generation.targets import DEFAULT_FIRST
from capsule.pipeline.generate import GenerateRequest, generate_one
from capsule.prereg.adhoc import AdhocOptions
from capsule.prereg.backend_specs import BACKENDS
from capsule.prereg.plan import DTYPES

# The options that describe an ad-hoc arm (click parameter names); with --plan they are refused.
ADHOC_SETTINGS = tuple(field.name for field in dataclasses.fields(AdhocOptions))
ADHOC_OPTIONS = (*ADHOC_SETTINGS, "keys_text", "first")


def _refuse_adhoc_options(ctx: click.Context) -> None:
    """With --plan the arm's settings are the plan's: an ad-hoc option given too would be ignored
    silently, so it is refused (BadInputError naming it)."""
    given = [
        param.opts[0]
        for param in ctx.command.params
        if param.name in ADHOC_OPTIONS
        and ctx.get_parameter_source(param.name) is not click.core.ParameterSource.DEFAULT
    ]
    if given:
        raise BadInputError(
            f"{', '.join(given)}: ad-hoc option(s); with --plan the arm's settings are the plan's, drop them"
        )


@click.command()
@plan_option("A sealed plan.toml (or its directory).")
@click.option("--arm", "arm_name", help="The plan's arm to run.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="The run directory itself: created, or resumed if it holds a run of the same plan or options "
    "(with --dry-run: DIR/dry-run). Without it: the latest unfinished run of the same plan or options, else "
    "a new one, under results/<plan>/ (--plan), runs/adhoc/ (ad hoc) or runs/dry-run/<plan or adhoc>/.",
)
@click.option(
    "--model-dir", type=click.Path(path_type=Path), help="Local model directory (else the plan's source)."
)
@click.option("--backend", default="hf", show_default=True, help=f"Ad-hoc: {' | '.join(BACKENDS)}.")
@click.option(
    "--dtype", default="bfloat16", show_default=True, type=click.Choice(DTYPES)
)
@click.option(
    "--batch-size", type=int, default=8, show_default=True, help="Ad-hoc: batch size (max_num_seqs)."
)
@click.option(
    "--max-new-tokens", type=int, default=32, show_default=True, help="Ad-hoc: new tokens per prompt."
)
@click.option("--keys", "keys_text", default=None, help="Ad-hoc: comma-separated prompt keys.")
@click.option(
    "--first",
    type=int,
    default=None,
    help=f"Ad-hoc, instead of --keys: the first N prompts (default {DEFAULT_FIRST}).",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Ad-hoc: arm seed (batch execution order)."
)
@click.option("--batch-order", type=click.Choice(["file", "length"]), default="file", show_default=True)
@click.option(
    "--name", default="adhoc", show_default=True, help="Ad-hoc: arm name (file name under generations/)."
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Fake backend and tokenizer, no model: into runs/dry-run/<plan or adhoc>/ (or <out>/dry-run).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@endpoint_options
@ledger_option("With --plan: the ledger the plan is sealed in (verified first); a recorded run's start is "
               "appended to it.")
def generate(no_progress: bool, **given: Any) -> None:
    """Generate one arm into a run directory: `--plan P --arm A`, or ad hoc (greedy) from the options."""
    if given["plan_path"] is not None and given["arm_name"]:
        _refuse_adhoc_options(click.get_current_context())
    adhoc = AdhocOptions(**{name: given.pop(name) for name in ADHOC_SETTINGS})
    request = GenerateRequest(adhoc=adhoc, progress=not no_progress, **given)
    result = generate_one(request, lambda line: click.echo(line, err=True))
    state = "complete" if result.complete else f"partial ({result.reason})"
    click.echo(
        f"{result.rows_path}: {result.n_rows}/{result.n_keys} rows, {result.new_rows} new, "
        f"{result.new_tokens} tokens in {result.elapsed_s:.1f}s; {state}"
    )
