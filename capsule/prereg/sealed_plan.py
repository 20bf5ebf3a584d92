"""A sealed plan, opened once: the one way `reproduce`, the rehearsal, `generate`, `doctor` and
`plan cost` read a plan they run or price.

`open_sealed_plan` reads the plan's bytes once and parses those bytes, loads and verifies the ledger
once, and checks the bytes against their seal (and the companions', and that no amendment
supersedes the plan); what it returns carries all of it, so no caller reads the plan or the ledger
again. Unsealed, changed or superseded: VerificationError (exit 3) naming the command that fixes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from capsule.errors import VerificationError
from capsule.hashing import sha256_bytes, sha256_file
from capsule.prereg.ledger import DEFAULT_LEDGER, Ledger
from capsule.prereg.ledger_entries import FileRecord
from capsule.prereg.loader import plan_file, read_plan
from capsule.prereg.plan import Plan


@dataclass(frozen=True)
class SealedPlan:
    """A plan read once: the parsed plan, its file and bytes, its ledger record, and the verified
    ledger it was checked against."""

    plan: Plan
    file: Path
    data: bytes
    seal: FileRecord
    ledger: Ledger

    @property
    def relative(self) -> str:
        """The plan file's path as the ledger records it (relative to the ledger's root)."""
        return self.ledger.relative(self.file)


def open_sealed_plan(plan_path: Path, ledger_path: Path = DEFAULT_LEDGER) -> SealedPlan:
    """Read and validate the plan (a plan.toml or its directory), verify the ledger at `ledger_path`,
    and check the plan's bytes are sealed in it (BadInputError for a malformed plan or ledger,
    VerificationError for one that does not verify or a plan not sealed as it is), before anything
    is written."""
    file = plan_file(Path(plan_path))
    plan, data = read_plan(file)
    ledger = Ledger.load(ledger_path)
    ledger.verify()
    return SealedPlan(plan, file, data, check_sealed(ledger, file, sha256_bytes(data)), ledger)


def check_sealed(ledger: Ledger, plan_path: Path, plan_sha256: str | None = None) -> FileRecord:
    """Refuse (VerificationError, exit 3) unless the plan's bytes (`plan_sha256`: the hash of the bytes
    the caller read and parsed, else the file is hashed here), and its companions' (rationale,
    controls), match their latest records in the verified `ledger`, and no amendment supersedes it.
    Returns the plan's latest record (seal / amend, or a later redact)."""
    relative = ledger.relative(plan_path)
    latest = ledger.latest_for(relative)
    if latest is None:
        raise VerificationError(
            f"{relative}: not sealed in {ledger.path}; run `capsule prereg seal {relative} "
            "--note ...` before generating"
        )
    if plan_sha256 is None:
        if not plan_path.is_file():
            raise VerificationError(f"{relative}: sealed at seq {latest.seq} but the file is missing")
        plan_sha256 = sha256_file(plan_path)
    if plan_sha256 != latest.sha256:
        raise VerificationError(
            f"{relative}: sha256 {plan_sha256} does not match its seq {latest.seq} record "
            f"{latest.sha256}; restore the sealed bytes or seal an amendment"
        )
    amended = ledger.superseded_by(relative)
    if amended is not None:
        raise VerificationError(
            f"{relative}: superseded by {amended.path} (amend, seq {amended.seq}); run that plan"
        )
    records = ledger.plan_records(relative)
    if not records:
        raise VerificationError(f"{relative}: recorded at seq {latest.seq} but never sealed as a plan")
    for companion in sorted(records[-1].companions or {}):
        companion_latest = ledger.latest_for(companion)
        file = ledger.root / companion
        if companion_latest is None or not file.is_file() or sha256_file(file) != companion_latest.sha256:
            raise VerificationError(f"{relative}: its sealed companion {companion} is missing or changed")
    return latest
