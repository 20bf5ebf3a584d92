"""`capsule report RUN_DIR`: write RESULTS.md and plots, check them, or refresh README regions."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.commands.options import ledger_option
from capsule.errors import BadInputError, VerificationError
from capsule.pipeline.report_run import check_run_report, write_run_report
from capsule.report.numbers import update_file


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--update",
    "update_files",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Rewrite this Markdown file's capsule:numbers regions of this run (repeatable); "
    "the run directory is left alone.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Verify a signed run (as `capsule verify`, trust included), re-render RESULTS.md and compare "
    "it with the file (exit 3 on a difference, or for an unsigned run, which is not evidence).",
)
@click.option(
    "--resign",
    is_flag=True,
    help="For a signed run: verify it, re-render RESULTS.md and plots with this version's code, and "
    "sign a new bundle (a new ledger entry; the old one stays). Generations, scores and analysis are "
    "never touched.",
)
@click.option(
    "--key", "signing_key", type=click.Path(path_type=Path, dir_okay=False), default=None,
    help="With --resign: the private key (default: $CAPSULE_SIGNING_KEY, then `capsule keygen`'s).",
)
@ledger_option("With --resign: the ledger; with --check: the ledger a signed run is verified against.")
@click.option("--fingerprint", default=None, help="Signing key fingerprint to state in RESULTS.md.")
@click.option(
    "--no-plots", is_flag=True, help="Write RESULTS.md only (it then shows the plots already there)."
)
def report(
    run_dir: Path,
    update_files: tuple[Path, ...],
    check: bool,
    resign: bool,
    signing_key: Path | None,
    ledger_path: Path,
    fingerprint: str | None,
    no_plots: bool,
) -> None:
    """Write RUN_DIR/RESULTS.md and RUN_DIR/plots/*.png from its analysis.json and manifest.json.

    A signed run (bundle.json present) is only rewritten when nothing would change, since any
    change would break its signature.
    """
    if sum((check, bool(update_files), resign)) > 1:
        raise BadInputError("--check, --update and --resign do different things; run them one at a time")
    if resign:
        from capsule.pipeline.resign import resign_run

        result = resign_run(run_dir, ledger_path=ledger_path, signing_key=signing_key)
        if result.recovered:
            click.echo(result.recovered, err=True)
        if result.bundle is None:
            click.echo(f"{run_dir}: its report is already what this version renders; nothing re-signed")
            return
        click.echo(result.key_line, err=True)
        entry = result.bundle.ledger_entry
        click.echo(
            f"{run_dir}: re-rendered {', '.join(result.changed)}; signed a new bundle "
            f"({result.bundle.n_files} files, key {result.bundle.fingerprint})"
            + (f", ledger entry {entry.seq}" if entry else "")
        )
        return
    if check:
        report_check = check_run_report(run_dir, ledger_path)
        if report_check.diff:
            click.echo("\n".join(report_check.diff[:60]))
            raise VerificationError(report_check.verdict)
        click.echo(report_check.verdict)
        return
    if update_files:
        for path in update_files:
            click.echo(f"{path}: {update_file(path, run_dir)} region(s) rewritten from {run_dir}")
        return
    click.echo(write_run_report(run_dir, fingerprint=fingerprint, plots=not no_plots))
