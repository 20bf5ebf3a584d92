"""`capsule verify RUN_DIR [--key PUBKEY] [--ledger PATH]`: check a signed run bundle, offline."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.commands.options import ledger_option
from capsule.errors import printable


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--key", "pubkey", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
    help="Pin the signer: the public key PEM the signature must be by, accepted even if the run's plan "
    "does not trust it [default: the bundle's own bundle.pub.pem, which must be a key the plan trusts].",
)
@ledger_option("The ledger the run was sealed in.")
def verify(run_dir: Path, pubkey: Path | None, ledger_path: Path) -> None:
    """Verify a run's signature, every file's digest, that its signer is trusted by its plan (or pinned
    with --key), and its plan seal and bundle entry in the ledger.

    Exit 0 with a one-line summary naming the key and why it is trusted, or exit 3 with the first
    failure and what differs.
    """
    from capsule.evidence.verify import verify_run

    click.echo(printable(verify_run(run_dir, pubkey=pubkey, ledger_path=ledger_path).line()))
