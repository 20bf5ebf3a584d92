"""A verified run against the ledger: the plan sealed before the run started, the run's start and
bundle (or import) entries, and the trust rule for its signer, decided by entries the signer did not
write into the run. Any failure: VerificationError (exit 3).
"""

from __future__ import annotations

from pathlib import Path

from capsule.errors import CapsuleError, VerificationError
from capsule.evidence.bundle_index import BundleIndex
from capsule.evidence.trust import SignerVerdict, check_signer
from capsule.prereg.anchor import anchored_entries
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import ImportEntry
from capsule.run_dir import ENVELOPE


def load_ledger(ledger_path: Path) -> Ledger:
    """The ledger at `ledger_path`, its chain verified (any failure: VerificationError, exit 3)."""
    if not ledger_path.is_file():
        raise VerificationError(f"ledger {ledger_path} not found; pass --ledger PATH")
    try:
        ledger = Ledger.load(ledger_path)
        ledger.verify()
    except VerificationError:
        raise
    except CapsuleError as error:
        raise VerificationError(f"ledger {ledger_path} does not verify: {error}") from error
    return ledger


def _check_import(ledger: Ledger, ledger_path: Path, bundle: BundleIndex, imported: ImportEntry,
                  fingerprint: str) -> tuple[int, str, int]:
    """A run made elsewhere and imported (`capsule import`): the import entry pins this envelope and
    key, and names this ledger's record of the run's plan (its order against the run's start was
    checked in the foreign chain when the run was imported)."""
    seal = ledger.with_hash(imported.seal)
    plan_path, plan_sha = bundle.plan.path, bundle.plan.sha256
    if seal is None or seal.path != plan_path or seal.sha256 != plan_sha:
        raise VerificationError(
            f"ledger {ledger_path}: import entry {imported.seq} names seal {imported.seal}, "
            f"which does not record the run's plan {plan_path} at sha256 {plan_sha}"
        )
    if imported.key_fingerprint != fingerprint:
        raise VerificationError(
            f"ledger import entry {imported.seq} records key {imported.key_fingerprint}, "
            f"the bundle is signed by {fingerprint}"
        )
    return seal.seq, f"{imported.foreign_start_seq} of the imported chain", imported.seq


def check_ledger(ledger: Ledger, ledger_path: Path, bundle: BundleIndex, envelope_sha256: str,
                 fingerprint: str) -> tuple[int, int | str, int]:
    """Plan sealed before the run's start head; a bundle entry pins this envelope and key (or, for a
    run imported from another machine, an import entry does). Returns the seqs of the plan record,
    the start head and the bundle (or import) entry."""
    imported = [e for e in ledger.run_entries(bundle.run_id)
                if isinstance(e, ImportEntry) and e.sha256 == envelope_sha256]
    if imported:
        return _check_import(ledger, ledger_path, bundle, imported[-1], fingerprint)
    start = ledger.with_hash(bundle.ledger_heads.at_start)
    if start is None:
        raise VerificationError(
            f"ledger {ledger_path}: the run's start head {bundle.ledger_heads.at_start} is none of "
            "its entries"
        )
    plan_path, plan_sha = bundle.plan.path, bundle.plan.sha256
    for_plan = ledger.file_records(plan_path)
    before = [entry for entry in for_plan if entry.seq <= start.seq]
    if not before:
        later = f"; it was sealed at entry {for_plan[0].seq}" if for_plan else ""
        raise VerificationError(
            f"plan {plan_path} was not sealed before the run started (start head: entry "
            f"{start.seq}){later}"
        )
    plan_entry = before[-1]
    superseded = ledger.superseded_by(plan_path, at_seq=start.seq)
    if superseded is not None:
        raise VerificationError(
            f"plan {plan_path} was superseded by {superseded.path} (amend, entry "
            f"{superseded.seq}) before the run started; runs must use the amended plan"
        )
    if plan_entry.sha256 != plan_sha:
        raise VerificationError(
            f"plan {plan_path}: the run used sha256 {plan_sha}, the ledger's {plan_entry.kind} entry "
            f"{plan_entry.seq} (in force at the run's start) records {plan_entry.sha256}"
        )
    started = ledger.start_entry(bundle.run_id)
    moved = started is not None and started.hash != start.hash
    if started is not None and (moved or (started.path, started.sha256) != (plan_path, plan_sha)):
        raise VerificationError(
            f"ledger {ledger_path}: run {bundle.run_id} started at its start entry {started.seq} "
            f"(plan {started.path}), but its bundle names entry {start.seq} as its start head and plan "
            f"{plan_path}: the run's start was rewritten after the ledger recorded it"
        )
    run_id = bundle.run_id
    matching = ledger.bundle_entries(run_id, envelope_sha256)
    if not matching:
        recorded = ", ".join(entry.sha256 for entry in ledger.bundle_entries(run_id)) or "no bundle entry"
        raise VerificationError(
            f"ledger {ledger_path}: run {run_id}: {ENVELOPE} has sha256 {envelope_sha256}; "
            f"ledger has {recorded}"
        )
    bundle_entry = matching[-1]
    at_bundle = ledger.with_hash(bundle.ledger_heads.at_bundle)
    if at_bundle is None or not start.seq <= at_bundle.seq < bundle_entry.seq:
        raise VerificationError(
            f"ledger {ledger_path}: the bundle's head at signing {bundle.ledger_heads.at_bundle} "
            f"is not an entry between the run's start (entry {start.seq}) and its bundle entry "
            f"{bundle_entry.seq}"
        )
    if bundle_entry.key_fingerprint != fingerprint:
        raise VerificationError(
            f"ledger bundle entry {bundle_entry.seq} records key "
            f"{bundle_entry.key_fingerprint}, the bundle is signed by {fingerprint}"
        )
    return plan_entry.seq, start.seq, bundle_entry.seq


LEGACY_START = 0  # the start of a run with no `start` entry, for the trust rule (see `start_seq_of`)


def start_seq_of(ledger: Ledger, bundle: BundleIndex) -> int:
    """The seq at which the run started, as the ledger decides: its `start` entry, appended when the
    run was opened (`check_ledger` requires the run's start head to name it). A run with none (opened
    before starts were recorded, or never against this ledger) has only its own word for its start
    (`ledger_heads.at_start`, which its signer writes), so it counts as started before every entry
    (`LEGACY_START`): a key that a `signers` entry added signs it only where the anchored history
    vouches for a signature bundled before that entry (`check_signer`)."""
    started = ledger.start_entry(bundle.run_id)
    return LEGACY_START if started is None else started.seq


def check_trust(ledger: Ledger, ledger_path: Path, bundle: BundleIndex, fingerprint: str,
                plan_bytes: bytes | None, pubkey: Path | None, *, bundled_at: int | None,
                imported_at: int | None = None, remedy: str | None = None) -> SignerVerdict:
    """The trust rule (`capsule.evidence.trust.check_signer`) for a run of `bundle`: its key trusted for
    its plan by the plan itself or by a `signers` entry at or before the run's start (or one that
    vouches, from the anchored history, for a signature bundled before it). The one rule `verify`,
    `compare` and `check-numbers` apply, recorded in the ledger or not.

    `imported_at`: the seq of this ledger's `import` entry of the run, for a run made elsewhere. Its
    start is then the import, an append of this ledger that the run's signer did not write: a key
    trusted by a `signers` entry before the import signs it (the import itself checked the run's own
    start in the foreign chain), one added after it does not."""
    def anchored() -> int:
        return anchored_entries(ledger_path, ledger_path.read_bytes(), ledger.hashes())

    try:  # before the ledger's own checks: a re-signed forgery is named by its untrusted key
        return check_signer(
            ledger, bundle.plan.path, fingerprint, plan_bytes=plan_bytes, pinned=pubkey,
            bundled_at=bundled_at, anchored=anchored,
            started_at=imported_at if imported_at is not None else start_seq_of(ledger, bundle),
            **({"remedy": remedy} if remedy is not None else {}),
        )
    except CapsuleError as error:  # an unreadable plan copy is a failed verification too
        raise VerificationError(f"run {bundle.run_id}: {error}") from error
