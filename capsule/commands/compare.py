"""`capsule compare RUN_A RUN_B [--json] [--ledger PATH]`: two runs of one sealed plan, arm by arm."""

from __future__ import annotations

import json
from pathlib import Path

import click

from capsule.prereg.ledger import DEFAULT_LEDGER


@click.command()
@click.argument("run_a", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("run_b", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON instead of Markdown.")
@click.option(
    "--ledger", "ledger_path", type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_LEDGER, show_default=True,
    help="This repository's ledger: a run it records is verified against it too.",
)
def compare(run_a: Path, run_b: Path, as_json: bool, ledger_path: Path) -> None:
    """Compare two complete runs of the same sealed plan (typically from two machines).

    Verifies both, then per arm: identical responses, first divergence, every metric's difference
    with exact McNemar and a paired bootstrap interval, the verdicts side by side, and the manifest
    differences that can change numerics. Exit 2 for different plans or an incomplete run, 3 when a
    run fails verification.
    """
    from capsule.evidence.compare import compare_runs
    from capsule.report.comparison import render_comparison

    result = compare_runs(run_a, run_b, ledger_path=ledger_path)
    if as_json:
        click.echo(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        click.echo(render_comparison(result), nl=False)
