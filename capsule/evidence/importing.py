"""`capsule import`: a run made on another machine enters this repository's ledger.

A run made elsewhere (a collaborator's GPU host, a machine with another CPU) is chained in that
machine's copy of the ledger: the same entries as ours up to the seal of the run's plan, then its
own (its bundle entry among them). Appending that copy's entries here would fork the chain; instead
one `import` entry records the run's envelope (path here, sha256), its run id, its signer's key
fingerprint, the foreign bundle entry's hash and seq, and the hash of our plan record both chains
share. Order of checks, nothing appended unless all pass:

1. the run is finished (signed bundle, analysis, every arm complete), and no dry run (an arm on the
   fake backend that its plan does not declare): else BadInputError (exit 2);
2. its signature and every file verify (VerificationError, exit 3);
3. this ledger verifies; a run it already records with this envelope is "already recorded" (nothing
   appended), one it records with another envelope (a re-signed copy) is refused (exit 3);
4. this ledger records the run's plan bytes (else exit 2: a run of another plan), and the run's
   signer is a key the plan trusts here (the plan's `[evidence] signers` and `signers` entries:
   `capsule.evidence.trust`) (exit 3);
5. the foreign ledger's entries link (hashes, prev, fields), its entries up to our plan record are
   byte-identical to ours, and after it the run's start, its bundle entry (this envelope, this key)
   follow in order, the plan not superseded before the start (VerificationError, exit 3).

Two forms share these checks (`verified_run`, then `check_import`): a run directory already copied
into this repository with the other machine's ledger file (`import_run`), and a run pack
(`capsule.evidence.pack_import`), whose foreign ledger is this ledger's entries before the plan
record followed by the packed ones. After the import, `capsule verify` accepts the run here like a
local one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from capsule.errors import BadInputError, CapsuleError, VerificationError
from capsule.evidence.bundle_index import BundleIndex, PlanRef, read_index
from capsule.evidence.finished import check_complete, check_not_dry_run
from capsule.evidence.ledger_checks import check_ledger
from capsule.evidence.trust import check_signer
from capsule.evidence.verify import VerifySummary, verify_run
from capsule.hashing import sha256_file
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import BundleEntry, ImportEntry, RunRecord
from capsule.run_dir import RunDir


@dataclass(frozen=True)
class ImportResult:
    """What an import did: the entry appended, or the one already recording the run."""

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


@dataclass(frozen=True)
class VerifiedRun:
    """A finished run whose signature and files verify (`verified_run`): what the chain checks read."""

    run_dir: Path
    summary: VerifySummary
    bundle: BundleIndex
    envelope_sha256: str


@dataclass(frozen=True)
class ForeignChain:
    """The other machine's ledger as the import checks it, and how its errors name it."""

    ledger: Ledger
    label: str  # "foreign ledger PATH", or the pack's name for its entries
    path: Path  # what `check_ledger`'s messages name


@dataclass(frozen=True)
class PendingImport:
    """An import every check has passed: the one `import` entry `record` appends."""

    run_id: str
    entry_path: str
    envelope_sha256: str
    fingerprint: str
    foreign: BundleEntry
    start_seq: int
    seal: str
    note: str

    def record(self, ours: Ledger) -> ImportResult:
        """Append the import entry to `ours` (re-read if it changed meanwhile; `Ledger.append`
        refuses if it changes during the append)."""
        entry = ours.current().append(ImportEntry(
            path=self.entry_path, sha256=self.envelope_sha256,
            note=self.note or f"run {self.run_id} made on another machine, imported from its ledger",
            run_id=self.run_id, key_fingerprint=self.fingerprint, foreign_entry=self.foreign.hash,
            foreign_seq=self.foreign.seq, foreign_start_seq=self.start_seq, seal=self.seal,
        ))
        return ImportResult(entry, appended=True)


FOREIGN_REMEDY = "pass --ledger with the other machine's ledger.jsonl"


def load_verified(path: Path, label: str, *, files: bool, remedy: str = FOREIGN_REMEDY) -> Ledger:
    """Load a ledger whose chain verifies (and, with `files`, whose recorded files here re-hash):
    BadInputError ending with `remedy` when it is missing, VerificationError naming `label` when it
    does not verify."""
    if not path.is_file():
        raise BadInputError(f"{label} {path} not found; {remedy}")
    try:
        ledger = Ledger.load(path)  # every entry's fields, hash and link are checked as it is read
        if files:
            ledger.verify()
    except VerificationError as error:
        raise VerificationError(f"{label} {path} does not verify: {error}") from error
    return ledger


def verified_run(run_dir: Path) -> VerifiedRun:
    """Checks 1 and 2 of the module doc: the run is finished, no dry run, and its signature and every
    file verify (no ledger yet)."""
    arms = check_complete(run_dir)
    summary = verify_run(run_dir, pubkey=None, ledger_path=None)  # signature and every file
    check_not_dry_run(run_dir, arms)
    envelope_sha256 = sha256_file(RunDir(run_dir).envelope)
    return VerifiedRun(run_dir, summary, read_index(run_dir)[1], envelope_sha256)


def plan_record_index(ledger: Ledger, plan: PlanRef) -> int:
    """Index of this ledger's seal / amend entry of the run's plan bytes (exit 2 if there is none)."""
    matches = [entry.seq - 1 for entry in ledger.plan_records(plan.path) if entry.sha256 == plan.sha256]
    if not matches:
        raise BadInputError(
            f"the run's plan {plan.path} (sha256 {plan.sha256}) is not sealed in "
            f"{ledger.path}: a run of another plan, or of a plan this repository never sealed"
        )
    return matches[-1]


def _check_shared_prefix(ours: Ledger, theirs: ForeignChain, upto: int) -> None:
    """Their entries 1..upto+1 must be ours, byte for byte (same canonical JSON, hence same hashes)."""
    for index in range(upto + 1):
        mine = ours.entries[index]
        other = theirs.ledger.entries[index] if index < len(theirs.ledger.entries) else None
        if other != mine:
            what = "is missing" if other is None else f"has hash {other.hash}, ours {mine.hash}"
            raise VerificationError(
                f"{theirs.label}: entry {index + 1} {what}: it does not chain to this "
                f"ledger's seal of the plan (entry {upto + 1}); it is not a copy of this repository's ledger"
            )


def _recorded(ours: Ledger, run_id: str, envelope_sha256: str) -> RunRecord | None:
    """The entry recording this run with this envelope, or None; a run recorded with another
    envelope (a re-signed copy of it) is refused, naming the entry that records it."""
    records = ours.run_entries(run_id)
    same = next((record for record in records if record.sha256 == envelope_sha256), None)
    if same is None and records:
        other = records[-1]
        raise VerificationError(
            f"run {run_id} is already recorded in {ours.path} at entry {other.seq} ({other.kind}) "
            f"with another envelope (sha256 {other.sha256[:16]}, this copy's {envelope_sha256[:16]}): a "
            "re-signed copy of a recorded run is never imported as a second record"
        )
    return same


def check_import(
    run: VerifiedRun, ours: Ledger, foreign: Callable[[int], ForeignChain], *, entry_path: str, note: str
) -> ImportResult | PendingImport:
    """Checks 3 to 5 of the module doc against `ours` (loaded and verified): the entry already
    recording the run (nothing to append), or the import to append. `foreign(seal_index)` gives the
    other machine's ledger once this one's record of the plan (its index) is known; `entry_path` is
    where the run's envelope sits (or will sit) in this repository, as the entry records it."""
    summary, bundle, envelope_sha256 = run.summary, run.bundle, run.envelope_sha256
    already = _recorded(ours, summary.run_id, envelope_sha256)
    if already is not None:
        return ImportResult(already, appended=False)
    seal_index = plan_record_index(ours, bundle.plan)
    plan_copy = RunDir(run.run_dir).plan
    check_signer(  # the foreign signer must be one this repository's plan trusts (prereg signers)
        ours, bundle.plan.path, summary.fingerprint,
        plan_bytes=plan_copy.read_bytes() if plan_copy.is_file() else None,
        remedy=f"if it is your collaborator's key, add it first: capsule prereg signers "
        f"{Path(bundle.plan.path).parent} --add {summary.fingerprint} --reason \"...\"",
    )
    theirs = foreign(seal_index)
    _check_shared_prefix(ours, theirs, seal_index)
    try:
        check_ledger(theirs.ledger, theirs.path, bundle, envelope_sha256, summary.fingerprint)
    except CapsuleError as error:
        raise VerificationError(f"{theirs.label}: {error}") from error
    start = theirs.ledger.with_hash(bundle.ledger_heads.at_start)
    if start is None:  # check_ledger found it already
        raise VerificationError(f"{theirs.label}: the run's start head is no entry of it")
    if start.seq - 1 < seal_index:
        raise VerificationError(
            f"{theirs.label}: the run started at entry {start.seq}, before this "
            f"ledger's record of its plan (entry {seal_index + 1})"
        )
    return PendingImport(
        summary.run_id, entry_path, envelope_sha256, summary.fingerprint,
        theirs.ledger.bundle_entries(summary.run_id, envelope_sha256)[-1], start.seq,
        ours.entries[seal_index].hash, note,
    )


def import_run(run_dir: Path, *, foreign_ledger: Path, ledger_path: Path, note: str = "") -> ImportResult:
    """Verify `run_dir` (inside this repository) and its foreign chain (the other machine's ledger
    file), then append one `import` entry; see the module doc."""
    run = verified_run(run_dir)
    ours = load_verified(ledger_path, "ledger", files=True)
    entry_path = ours.relative(RunDir(run_dir).envelope)  # the run must sit inside this repository

    def theirs(_seal_index: int) -> ForeignChain:
        label = f"foreign ledger {foreign_ledger}"
        ledger = load_verified(foreign_ledger, "foreign ledger", files=False)
        return ForeignChain(ledger, label, foreign_ledger)

    checked = check_import(run, ours, theirs, entry_path=entry_path, note=note)
    return checked if isinstance(checked, ImportResult) else checked.record(ours)
