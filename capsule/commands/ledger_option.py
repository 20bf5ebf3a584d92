"""`--ledger`, the option every command that reads a plan's seal takes, declared once."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.prereg.ledger import DEFAULT_LEDGER

LEDGER_OPTION = click.option(
    "--ledger",
    "ledger_path",
    type=click.Path(path_type=Path),
    default=DEFAULT_LEDGER,
    show_default=True,
    help="The hash-chain ledger plans are sealed in; entry paths are relative to its grandparent.",
)
