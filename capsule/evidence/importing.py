"""`capsule import`: a run made on another machine enters this repository's ledger.

A run made elsewhere (a collaborator's GPU host, a machine with another CPU) is chained in that
machine's copy of the ledger: the same entries as ours up to the seal of the run's plan, then its
own (its bundle entry among them). Appending that copy's entries here would fork the chain; instead
one `import` entry records the run's envelope (path here, sha256), its run id, its signer's key
fingerprint, the foreign bundle entry's hash and seq, and the hash of our plan record both chains
share. Order of checks, nothing appended unless all pass:

1. the run is finished (signed bundle, analysis, every arm complete), and no dry run (an arm on the
   fake backend that its plan does not declare): else BadInputError (exit 2);
2. its signature and every file verify, and its signer is a key the plan trusts here (the plan's
   `[evidence] signers` and `signers` entries: `capsule.evidence.trust`) (VerificationError, exit 3);
3. this ledger verifies and records the run's plan bytes (else exit 2: a run of another plan);
4. the foreign ledger's entries link (hashes, prev, fields), its entries up to our plan record are
   byte-identical to ours, and after it the run's start, its bundle entry (this envelope, this key)
   follow in order, the plan not superseded before the start (VerificationError, exit 3).

Importing the same envelope twice appends nothing; a run this ledger already records is not
imported. After the import, `capsule verify` accepts the run here like a local one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from capsule.errors import BadInputError, CapsuleError, VerificationError
from capsule.evidence.finished import check_complete, check_not_dry_run, read_bundle
from capsule.evidence.trust import check_signer
from capsule.evidence.verify import check_ledger, verify_run
from capsule.hashing import sha256_file
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import ImportEntry, RunRecord
from capsule.run_dir import RunDir


@dataclass(frozen=True)
class ImportResult:
    """What `import_run` did: the entry appended, or the one already recording the run."""

    entry: RunRecord
    appended: bool

    def line(self) -> str:
        """One line for the command's output."""
        entry = self.entry
        if not isinstance(entry, ImportEntry) or not self.appended:
            return (
                f"already recorded: run {entry.run_id} is in the ledger at entry {entry.seq} "
                f"({entry.kind}); nothing appended"
            )
        return (
            f"imported run {entry.run_id} at ledger entry {entry.seq}: signed by "
            f"{entry.key_fingerprint[:16]}, foreign bundle entry {entry.foreign_seq} "
            f"({entry.foreign_entry[:16]}), plan record {entry.seal[:16]}"
        )


def _load_verified(path: Path, label: str, *, files: bool) -> Ledger:
    if not path.is_file():
        raise BadInputError(f"{label} {path} not found; pass --ledger with the other machine's ledger.jsonl")
    try:
        ledger = Ledger.load(path)  # every entry's fields, hash and link are checked as it is read
        if files:
            ledger.verify()
    except VerificationError as error:
        raise VerificationError(f"{label} {path} does not verify: {error}") from error
    return ledger


def _plan_record(ledger: Ledger, plan: dict[str, Any]) -> int:
    """Index of this ledger's seal / amend entry of the run's plan bytes (exit 2 if there is none)."""
    path = plan.get("path")
    matches = [
        entry.seq - 1 for entry in (ledger.plan_records(path) if isinstance(path, str) else [])
        if entry.sha256 == plan.get("sha256")
    ]
    if not matches:
        raise BadInputError(
            f"the run's plan {plan.get('path')} (sha256 {plan.get('sha256')}) is not sealed in "
            f"{ledger.path}: a run of another plan, or of a plan this repository never sealed"
        )
    return matches[-1]


def _check_shared_prefix(ours: Ledger, theirs: Ledger, upto: int) -> None:
    """Their entries 1..upto+1 must be ours, byte for byte (same canonical JSON, hence same hashes)."""
    for index in range(upto + 1):
        mine = ours.entries[index]
        other = theirs.entries[index] if index < len(theirs.entries) else None
        if other != mine:
            what = "is missing" if other is None else f"has hash {other.hash}, ours {mine.hash}"
            raise VerificationError(
                f"foreign ledger {theirs.path}: entry {index + 1} {what}: it does not chain to this "
                f"ledger's seal of the plan (entry {upto + 1}); it is not a copy of this repository's ledger"
            )


def _existing(ours: Ledger, run_id: str, envelope_sha256: str) -> RunRecord | None:
    return next((entry for entry in ours.run_entries(run_id) if entry.sha256 == envelope_sha256), None)


def import_run(run_dir: Path, *, foreign_ledger: Path, ledger_path: Path, note: str = "") -> ImportResult:
    """Verify `run_dir` and its foreign chain, then append one `import` entry; see the module doc."""
    arms = check_complete(run_dir)
    summary = verify_run(run_dir, pubkey=None, ledger_path=None)  # signature and every file
    check_not_dry_run(run_dir, arms)
    bundle = read_bundle(run_dir)
    envelope = RunDir(run_dir).envelope
    envelope_sha256 = sha256_file(envelope)
    ours = _load_verified(ledger_path, "ledger", files=True)
    entry_path = ours.relative(envelope)  # the run must sit inside this repository: fail before checks
    already = _existing(ours, summary.run_id, envelope_sha256)
    if already is not None:
        return ImportResult(already, appended=False)
    seal_index = _plan_record(ours, bundle["plan"])
    plan_copy = RunDir(run_dir).plan
    check_signer(  # the foreign signer must be one this repository's plan trusts (prereg signers)
        ours, bundle["plan"]["path"], summary.fingerprint,
        plan_bytes=plan_copy.read_bytes() if plan_copy.is_file() else None,
        remedy=f"if it is your collaborator's key, add it first: capsule prereg signers "
        f"{Path(bundle['plan']['path']).parent} --add {summary.fingerprint} --reason \"...\"",
    )
    theirs = _load_verified(foreign_ledger, "foreign ledger", files=False)
    _check_shared_prefix(ours, theirs, seal_index)
    try:
        check_ledger(theirs, foreign_ledger, bundle, envelope_sha256, summary.fingerprint)
    except CapsuleError as error:
        raise VerificationError(f"foreign ledger {foreign_ledger}: {error}") from error
    start = theirs.with_hash(bundle["ledger_heads"]["at_start"])
    if start is None:  # check_ledger found it already
        raise VerificationError(f"foreign ledger {foreign_ledger}: the run's start head is no entry of it")
    if start.seq - 1 < seal_index:
        raise VerificationError(
            f"foreign ledger {foreign_ledger}: the run started at entry {start.seq}, before this "
            f"ledger's record of its plan (entry {seal_index + 1})"
        )
    foreign = theirs.bundle_entries(summary.run_id, envelope_sha256)[-1]
    entry = ours.current().append(
        "import", entry_path, envelope_sha256,
        note or f"run {summary.run_id} made on another machine, imported from its ledger",
        run_id=summary.run_id, key_fingerprint=summary.fingerprint, foreign_entry=foreign.hash,
        foreign_seq=foreign.seq, foreign_start_seq=start.seq, seal=ours.entries[seal_index].hash,
    )
    return ImportResult(cast(ImportEntry, entry), appended=True)  # append makes the kind it is given
