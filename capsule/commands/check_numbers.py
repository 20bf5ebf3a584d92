"""`capsule check-numbers FILE... [--run RUN_DIR]`: quoted regions must match the run that made them,
number for number and word for word."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.errors import VerificationError
from capsule.report.numbers import check_files


@click.command("check-numbers")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--run",
    "run_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Check every region against this run (default: each marker's own run=, relative to its file).",
)
def check_numbers(files: tuple[Path, ...], run_dir: Path | None) -> None:
    """Re-render every <!-- capsule:numbers --> region of FILES from its run and compare it whole:
    numbers and verdicts one by one, then every word; any drift exits 3 with the line, what was found
    and what the run gives."""
    result = check_files(list(files), run_dir)
    for drift in result.drifts:
        click.echo(str(drift))
    if result.drifts:
        raise VerificationError(
            f"{len(result.drifts)} difference(s) from the run in {len(files)} file(s); "
            "refresh them with `capsule report RUN_DIR --update FILE`"
        )
    click.echo(
        f"ok: {result.facts} numbers and verdicts, {result.words} words in {result.regions} region(s) "
        "match their run"
    )
