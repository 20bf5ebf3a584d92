"""`capsule prereg seal | amend | redact | signers | verify | confirm-redaction | newest`: the ledger."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.commands.options import ledger_option
from capsule.errors import BadInputError, printable
from capsule.prereg.ledger import Ledger, verify_anchored, verify_ledger
from capsule.prereg.ledger_entries import RedactEntry
from capsule.prereg.ledger_entries import entry_line as _show
from capsule.prereg.newest import newest_plan
from capsule.prereg.sealing import amend_plan, confirm_redaction, redact_file, seal_plan
from capsule.prereg.signers import add_signers


@click.group()
def prereg() -> None:
    """Seal plans before any score exists, and verify that nothing sealed has changed."""


@prereg.command()
@click.argument("plan", type=click.Path(path_type=Path))
@click.option("--note", required=True, help="What is sealed and why (recorded in the entry).")
@ledger_option()
def seal(plan: Path, note: str, ledger_path: Path) -> None:
    """Validate PLAN (plan.toml or its directory) and seal it with its rationale and controls files."""
    entries = seal_plan(plan, note, ledger_path)
    if not entries:
        click.echo(f"{plan}: already sealed with these bytes; nothing appended")
    for entry in entries:
        click.echo(f"sealed {_show(entry)}")


@prereg.command()
@click.argument("new_plan", type=click.Path(path_type=Path))
@click.option(
    "--of", "old_plan", type=click.Path(path_type=Path), required=True, help="The sealed plan it amends."
)
@click.option("--reason", required=True, help="Why (must equal the new file's amend_reason).")
@ledger_option()
def amend(new_plan: Path, old_plan: Path, reason: str, ledger_path: Path) -> None:
    """Seal NEW_PLAN as an amendment of a sealed plan; the old entry stays."""
    entries = amend_plan(new_plan, old_plan, reason, ledger_path)
    if not entries:
        click.echo(f"{new_plan}: already recorded as this amendment; nothing appended")
    for entry in entries:
        click.echo(f"recorded {_show(entry)}")


@prereg.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--token", required=True, help="The text to remove.")
@click.option("--with", "replacement", required=True, help="Same-length (in UTF-8 bytes) replacement.")
@click.option("--reason", required=True, help="Why the bytes are redacted (recorded).")
@ledger_option()
def redact(file: Path, token: str, replacement: str, reason: str, ledger_path: Path) -> None:
    """Replace TOKEN in a sealed FILE with a same-length text and record the substitution."""
    entry = redact_file(file, token, replacement, reason, ledger_path)
    click.echo(f"redacted {_show(entry)}")


@prereg.command()
@click.argument("plan", type=click.Path(path_type=Path))
@click.option(
    "--add", "fingerprints", multiple=True, required=True,
    help="Fingerprint of a public key allowed to sign the plan's runs (repeatable).",
)
@click.option("--reason", required=True, help="Why these keys may sign (recorded in the entry).")
@ledger_option()
def signers(plan: Path, fingerprints: tuple[str, ...], reason: str, ledger_path: Path) -> None:
    """Trust more keys to sign runs of the sealed PLAN: a sealed `signers` entry (keys are only added)."""
    entry, skipped = add_signers(plan, list(fingerprints), reason, ledger_path)
    for fingerprint in skipped:
        click.echo(f"{fingerprint}: already trusted for {plan}; not added again")
    if entry is not None:
        click.echo(f"recorded {_show(entry)}")


@prereg.command()
@click.option(
    "--anchor", default=None, metavar="REV|HEAD_HASH",
    help="Check that every entry of the ledger at this git revision, or up to this published head hash, "
    "is unchanged and in place [default: HEAD inside a git checkout].",
)
@ledger_option()
def verify(ledger_path: Path, anchor: str | None) -> None:
    """Recompute every hash and link, re-hash every recorded file (each must be present), and check the
    ledger against its anchor; exit 3 naming the first broken entry."""
    ledger, anchored = verify_anchored(ledger_path, anchor)
    for entry in ledger.entries:
        click.echo(_show(entry))
    files = {e.path for e in ledger.entries}
    if ledger.torn:
        click.echo(
            f"note: the last {ledger.torn} bytes of {ledger_path} are a torn append (a write cut short: a "
            "full disk, a crash), no entry; the next entry appended cuts them"
        )
    click.echo(printable(
        f"OK: {len(ledger.entries)} entries, chain intact, {len(files)} recorded files present and match; "
        f"{anchored.description}; head {ledger.head()}"
    ))


@prereg.command("confirm-redaction")
@click.argument("original", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--seq", type=int, required=True, help="The redact entry's seq.")
@ledger_option()
def confirm_redaction_command(original: Path, seq: int, ledger_path: Path) -> None:
    """Confirm redact entry SEQ from the ORIGINAL (pre-redaction) bytes and the file as it is now."""
    ledger = verify_ledger(ledger_path)
    entry = ledger.at_seq(seq)
    if not isinstance(entry, RedactEntry):
        raise BadInputError(f"{ledger_path}: seq {seq} is not a redact entry")
    current = (ledger.root / entry.path).read_bytes()
    confirm_redaction(entry, original.read_bytes(), current)
    click.echo(f"confirmed: {original} is the sealed original of {entry.path} (seq {seq})")


@prereg.command()
@click.option("--model", "model_name", required=True, help="The model's plan name or hub repo id.")
@ledger_option()
def newest(model_name: str, ledger_path: Path) -> None:
    """Print the newest sealed plan of a model that no amendment supersedes (its directory). The chain
    is verified; runs it records need not be present (a study volume holds its own)."""
    ledger = Ledger.load(ledger_path)
    ledger.verify()
    click.echo(newest_plan(ledger, model_name))
