"""`capsule import RUN_DIR --ledger THEIR_LEDGER`: record a run made on another machine in this ledger."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.commands.options import ledger_option
from capsule.errors import printable


@click.command(name="import")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@ledger_option("The other machine's ledger.jsonl, the one its run was chained in.", name="foreign_ledger",
               required=True)
@ledger_option("This repository's ledger, appended to.", flag="--into")
@click.option("--note", default="", help="Free text for the import entry [default: says where it came from].")
def import_run(run_dir: Path, foreign_ledger: Path, ledger_path: Path, note: str) -> None:
    """Verify a run from another machine and its ledger up to the shared seal, then append one
    `import` entry (its envelope, signer and foreign bundle entry) so `capsule verify` accepts it here.

    Copy the run directory into this repository first (for example under results/<plan>/). Importing
    the same run again appends nothing. Exit 2 for an unfinished run or a run of another plan, 3 when
    the run or the foreign chain fails verification; nothing is appended then.
    """
    from capsule.evidence.importing import import_run as run_import

    result = run_import(run_dir, foreign_ledger=foreign_ledger, ledger_path=ledger_path, note=note)
    click.echo(printable(result.line()))
