"""`capsule import FILE` (a pack from `capsule export`) or `capsule import RUN_DIR --ledger THEIR_LEDGER`:
record a run made on another machine in this ledger."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.commands.options import ledger_option
from capsule.errors import printable


@click.command(name="import")
@click.argument("source", metavar="FILE|RUN_DIR", type=click.Path(exists=True, path_type=Path))
@ledger_option("A run directory only: the other machine's ledger.jsonl, the one its run was chained in "
               "(a pack carries its entries).", name="foreign_ledger", optional=True)
@ledger_option("This repository's ledger, appended to.", flag="--into")
@click.option("--note", default="", help="Free text for the import entry [default: says where it came from].")
def import_run(source: Path, foreign_ledger: Path | None, ledger_path: Path, note: str) -> None:
    """Verify a run from another machine and its ledger up to the shared seal, then append one
    `import` entry (its envelope, signer and foreign bundle entry) so `capsule verify` accepts it here.

    FILE, a pack made by `capsule export` on that machine, carries the run and its ledger entries: the
    run is checked, then placed in results/<plan>/<run_id>/. A RUN_DIR already copied into this
    repository (for example under results/<plan>/) needs --ledger. Importing the same run again
    appends nothing. Exit 2 for a bad pack, an unfinished run or a run of another plan, 3 when the
    run or the foreign chain fails verification; nothing is written or appended then.
    """
    from capsule.evidence.pack_import import import_source

    result = import_source(source, foreign_ledger=foreign_ledger, ledger_path=ledger_path, note=note)
    click.echo(printable(result.line()))
