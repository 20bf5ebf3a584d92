"""`capsule verify`: check a signed run bundle offline, stopping at the first thing that differs.

Order (cheap and safe first): no symlinks or odd files in the run directory; `bundle.json` parses
and every listed path stays inside the run directory (before any listed file is read); the DSSE
signature verifies with the given or the included key; the signed Statement pins `bundle.json`
and agrees with it; the included key is the signing key; no file is missing or extra; every file's
size and sha256 match; the ledger verifies, the plan's seal precedes the run's start, and the
`bundle` entry pins this envelope and key; the signing key is trusted for the run's plan
(`capsule.evidence.trust`) or pinned by the user. Any failure raises VerificationError (exit 3).
The run's own files are checked by `signed_files`, its place in the ledger by `ledger_checks`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from capsule.errors import BadInputError, VerificationError
from capsule.evidence.bundle import list_run_files
from capsule.evidence.bundle_index import read_index
from capsule.evidence.ledger_checks import check_ledger, check_trust, load_ledger
from capsule.evidence.signed_files import (
    check_files,
    check_included_key,
    check_machine,
    check_statement,
    choose_key,
    read_signed_json,
)
from capsule.evidence.signing import fingerprint_of, verify_envelope
from capsule.hashing import sha256_bytes
from capsule.jsonio import parse_json
from capsule.prereg.anchor import check_anchor
from capsule.prereg.ledger_entries import ImportEntry
from capsule.run_dir import ENVELOPE, PLAN_COPY, RunDir


@dataclass(frozen=True)
class VerifySummary:
    """What `verify_run` established, for a one-line report."""
    run_id: str
    n_files: int
    total_bytes: int
    fingerprint: str
    key_source: str
    plan_path: str
    plan_seq: int | None
    start_seq: int | str | None  # a seq here, or "N of the imported chain"
    bundle_seq: int | None
    ledger_path: Path | None  # None: checked without a ledger (signature and digests only)
    ledger_entries: int
    trust: str  # which key signed and why it is accepted (`capsule.evidence.trust.SignerVerdict.why`)
    trusted_by: str = "not checked (no ledger)"  # `SignerVerdict.source`: plan, signers entry or --key

    def line(self) -> str:
        """One line: files, signature (and which key, and why it is trusted), plan seal order, ledger."""
        if self.ledger_path is None:
            return (
                f"OK run {self.run_id}: {self.n_files} files ({self.total_bytes} bytes) match; signature by "
                f"{self.fingerprint[:16]} ({self.key_source}); plan {self.plan_path}; not in this ledger "
                "(signature and digests only; no trust root without a ledger)"
            )
        return (
            f"OK run {self.run_id}: {self.n_files} files ({self.total_bytes} bytes) match; signature by "
            f"{self.fingerprint} ({self.key_source}); {self.trust}; plan {self.plan_path} sealed at ledger "
            f"entry {self.plan_seq}, before the run started (head: entry {self.start_seq}); bundle entry "
            f"{self.bundle_seq}; ledger {self.ledger_path} ({self.ledger_entries} entries) verifies"
        )


def verify_run(run_dir: Path, *, pubkey: Path | None, ledger_path: Path | None) -> VerifySummary:
    """Verify a bundled run directory against its signature, its files and the ledger; see module doc.
    `ledger_path=None` stops after the files (a run from elsewhere that this ledger does not record).
    A run whose re-sign was interrupted (its undo journal is there) is refused, whatever its files say:
    it is between two signatures until `capsule report RUN --resign` finishes or undoes that."""
    if not Path(run_dir).is_dir():  # click lets a FIFO or a device through as "not a file"
        raise BadInputError(f"{run_dir}: not a directory; give a run directory")
    journal = RunDir(run_dir).resign_journal
    if os.path.lexists(journal):
        raise VerificationError(
            f"{run_dir}: a `capsule report --resign` of this run was interrupted ({journal} holds the files "
            f"it was replacing); run `capsule report {run_dir} --resign` to finish or undo it"
        )
    return verify_signed_state(run_dir, pubkey=pubkey, ledger_path=ledger_path)


def verify_signed_state(run_dir: Path, *, pubkey: Path | None, ledger_path: Path | None) -> VerifySummary:
    """`verify_run`'s checks of the files as they stand, without refusing a run whose re-sign was
    interrupted: what the re-sign's recovery asks to decide between finishing and undoing."""
    on_disk = list_run_files(run_dir)  # rejects symlinks and odd files before anything is read
    bundle_bytes, bundle = read_index(run_dir)
    key, key_source = choose_key(run_dir, pubkey)
    envelope_bytes, envelope = read_signed_json(RunDir(run_dir).envelope, ENVELOPE)
    where = str(RunDir(run_dir).envelope)
    payload = verify_envelope(envelope, key, where)
    statement = parse_json(payload, f"{where} (signed payload)", error=VerificationError)
    check_statement(statement, bundle, bundle_bytes, where)
    fingerprint = fingerprint_of(key)
    check_included_key(run_dir, key, bundle.key.fingerprint)
    check_files(run_dir, on_disk, bundle.files)
    plan_item = bundle.listed(PLAN_COPY)
    if plan_item is not None and plan_item.sha256 != bundle.plan.sha256:
        raise VerificationError(
            f"{PLAN_COPY}: sha256 {plan_item.sha256}, the run's plan is {bundle.plan.sha256}"
        )
    if ledger_path is None:
        check_machine(run_dir, bundle)
        return VerifySummary(
            bundle.run_id, len(bundle.files), bundle.total_bytes, fingerprint, key_source,
            bundle.plan.path, None, None, None, None, 0, "trust not checked (no ledger)",
        )
    ledger = load_ledger(ledger_path)
    envelope_sha256 = sha256_bytes(envelope_bytes)
    plan_bytes = RunDir(run_dir).plan.read_bytes() if plan_item is not None else None  # verified above
    recorded = [e.seq for e in ledger.bundle_entries(bundle.run_id, envelope_sha256)]
    imported = [e.seq for e in ledger.run_entries(bundle.run_id)
                if isinstance(e, ImportEntry) and e.sha256 == envelope_sha256]
    verdict = check_trust(ledger, ledger_path, bundle, fingerprint, plan_bytes, pubkey,
                          bundled_at=recorded[-1] if recorded else None,
                          imported_at=imported[-1] if imported else None)
    plan_seq, start_seq, bundle_seq = check_ledger(ledger, ledger_path, bundle, envelope_sha256, fingerprint)
    check_anchor(ledger_path, ledger_path.read_bytes(), ledger.hashes(), None)
    check_machine(run_dir, bundle)
    return VerifySummary(
        bundle.run_id, len(bundle.files), bundle.total_bytes, fingerprint, key_source,
        bundle.plan.path, plan_seq, start_seq, bundle_seq, ledger_path, len(ledger.entries),
        verdict.why, verdict.source,
    )


def verify_unrecorded(run_dir: Path, ledger_path: Path, pubkey: Path | None = None) -> VerifySummary:
    """A run this ledger does not record (made elsewhere, not imported): its signature and every file,
    then the same trust rule as `verify_run`: its plan bytes are a version this ledger records for
    its plan path (else the plan copy's own `[evidence] signers` would vouch for itself), and its key
    is trusted for that plan here (or pinned: `pubkey`, as `verify --key`). What `compare` and
    `check-numbers` apply to such a run."""
    summary = verify_run(run_dir, pubkey=pubkey, ledger_path=None)
    ledger = load_ledger(ledger_path)
    _data, bundle = read_index(run_dir)
    plan_path, plan_sha = bundle.plan.path, bundle.plan.sha256
    if not any(e.sha256 == plan_sha for e in ledger.file_records(plan_path)):
        raise VerificationError(
            f"run {bundle.run_id}: its plan {plan_path} (sha256 {plan_sha}) is no version {ledger_path} "
            "records, so no key is trusted for it here"
        )
    plan_copy = RunDir(run_dir).plan
    verdict = check_trust(ledger, ledger_path, bundle, summary.fingerprint,
                          plan_copy.read_bytes() if plan_copy.is_file() else None, pubkey, bundled_at=None)
    return replace(summary, trust=verdict.why, trusted_by=verdict.source)
