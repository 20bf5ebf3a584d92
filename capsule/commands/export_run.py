"""`capsule export RUN --out FILE`: one file holding a run made here and the ledger entries that prove it."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.commands.options import ledger_option
from capsule.errors import printable


@click.command(name="export")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The pack to write (a new file; a .tar.gz, never overwritten).")
@ledger_option("The ledger that records the run (its bundle entry); its entries from the plan's record "
               "to the run's bundle entry go into the pack.")
def export_run(run_dir: Path, out: Path, ledger_path: Path) -> None:
    """Pack a finished, signed run made here, and the ledger entries from its plan's seal to its
    bundle entry, into one file that another repository takes in with `capsule import FILE`.

    Exit 2 for an unfinished or dry run, a run the ledger does not record by a bundle entry (an
    imported run among them: only runs made here are exported), or an --out that exists; 3 when the
    run fails verification. Nothing is written then.
    """
    from capsule.evidence.exporting import export_run as run_export

    result = run_export(run_dir, out=out, ledger_path=ledger_path)
    for line in result.lines():
        click.echo(printable(line))
