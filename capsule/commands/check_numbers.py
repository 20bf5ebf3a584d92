"""`capsule check-numbers FILE... [--run RUN_DIR] [--ledger L] [--key PEM]...`: quoted regions must
match the run that made them, number for number and word for word."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.commands.options import ledger_option, pinned_keys_option
from capsule.errors import VerificationError
from capsule.report.numbers import check_files


@click.command("check-numbers")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--run",
    "run_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Check every one-run region against this run (default: each marker's own run=, relative to "
    "its file).",
)
@ledger_option("The ledger every signed run is verified against (it must exist).")
@pinned_keys_option(
    "Pin a signer's public key PEM (repeatable): the runs it signed are accepted even if their plan does "
    "not trust it, as `verify --key`.",
)
def check_numbers(files: tuple[Path, ...], run_dir: Path | None, ledger_path: Path,
                  keys: tuple[Path, ...]) -> None:
    """Re-render every <!-- capsule:numbers --> region of FILES from its run and compare it whole:
    numbers and verdicts one by one, then every word; any drift exits 3 with the line, what was found
    and what the run gives. A region with against=RUN quotes `capsule compare` of its two runs, which
    are verified first; so is the run of every one-run region (its signature, files and signer
    trusted by this ledger's rules, as `capsule verify` and `capsule compare` check). A region quoting
    an unsigned run fails (exit 3), one quoting a dry run too (exit 2): neither is evidence."""
    from capsule.evidence.compare import comparison_renderer, verify_side

    result = check_files(list(files), run_dir, comparison_renderer(ledger_path, keys),
                         verify=lambda run: verify_side(run, ledger_path, keys))
    for drift in result.drifts:
        click.echo(str(drift))
    if result.drifts:
        raise VerificationError(
            f"{len(result.drifts)} difference(s) from the run in {len(files)} file(s); refresh a one-run "
            "region with `capsule report RUN_DIR --update FILE`, a comparison region with "
            "`capsule compare RUN_A RUN_B --update FILE`"
        )
    click.echo(
        f"ok: {result.facts} numbers and verdicts, {result.words} words in {result.regions} region(s) "
        f"match their run; {result.verified} signed run(s) verified"
    )
    if result.unquoted:
        click.echo(f"no regions in {len(result.unquoted)} file(s): {', '.join(map(str, result.unquoted))}")
