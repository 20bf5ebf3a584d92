"""What a loaded ledger answers: its head, the records of a file, of a plan and of a run, what
superseded a plan, and whether every file it records is in the checkout.

`LedgerEntries` holds the typed entries of one ledger file (`capsule.prereg.ledger.Ledger` reads,
locks and appends it) and the one query per question every other module asks; none of them reads
or writes the file.
"""

from __future__ import annotations

import os
from pathlib import Path

from capsule.errors import BadInputError, VerificationError
from capsule.prereg.chain import GENESIS, NAMES_A_PLAN, check_recorded_files, symlink_on_path
from capsule.prereg.ledger_entries import (
    AmendEntry,
    BundleEntry,
    Entry,
    FileRecord,
    ImportEntry,
    PlanRecord,
    RedactEntry,
    RunRecord,
    SealEntry,
    StartEntry,
)
from capsule.prereg.loader import PLAN_FILE


class LedgerEntries:
    """The entries of one ledger file, and the root its paths are relative to."""

    def __init__(self, path: Path, root: Path, entries: list[Entry]) -> None:
        self.path, self.root, self.entries = path, root, entries

    def head(self) -> str:
        """The hash of the last entry, or 64 zeros for an empty ledger."""
        return self.entries[-1].hash if self.entries else GENESIS

    def hashes(self) -> list[str]:
        """Every entry's hash, in chain order (what the anchor checks)."""
        return [entry.hash for entry in self.entries]

    def with_hash(self, digest: object) -> Entry | None:
        """The entry whose hash is `digest` (a run's start head, an import's seal), or None."""
        return next((entry for entry in self.entries if entry.hash == digest), None)

    def at_seq(self, seq: int) -> Entry | None:
        """The entry numbered `seq` (1-based, as `prereg verify` prints it), or None."""
        return self.entries[seq - 1] if 1 <= seq <= len(self.entries) else None

    def file_records(self, path: str) -> list[FileRecord]:
        """Every seal / amend / redact entry of a repo-relative path, in chain order: each version of
        its bytes the ledger recorded."""
        return [
            e for e in self.entries if isinstance(e, (SealEntry, AmendEntry, RedactEntry)) and e.path == path
        ]

    def latest_for(self, path: str) -> FileRecord | None:
        """The latest seal / amend / redact entry for a repo-relative path, or None."""
        records = self.file_records(path)
        return records[-1] if records else None

    def plan_records(self, path: str) -> list[PlanRecord]:
        """Every seal / amend entry of a repo-relative path, in chain order."""
        return [e for e in self.file_records(path) if isinstance(e, (SealEntry, AmendEntry))]

    def is_plan(self, path: str) -> bool:
        """Whether `path` was sealed as a plan (a seal / amend entry listing its companions)."""
        return any(e.companions is not None for e in self.plan_records(path))

    def run_entries(self, run_id: str) -> list[RunRecord]:
        """Every entry that records the run `run_id` as finished (a local `bundle` or an `import`), in
        chain order: the one answer to "is this run recorded", which decides that a run is never
        reopened, re-signed or resumed, and which entries `verify`, `compare` and `import` check."""
        return [
            e for e in self.entries if isinstance(e, (BundleEntry, ImportEntry)) and e.run_id == run_id
        ]

    def bundle_entries(self, run_id: str, envelope_sha256: str | None = None) -> list[BundleEntry]:
        """The `bundle` entries of the run (each signature made here), those pinning `envelope_sha256`
        only when it is given, in chain order."""
        return [
            e for e in self.run_entries(run_id)
            if isinstance(e, BundleEntry) and envelope_sha256 in (None, e.sha256)
        ]

    def start_entry(self, run_id: str) -> StartEntry | None:
        """The `start` entry of the run `run_id` (appended when it was opened), None for a run
        opened before runs' starts were recorded, or not opened against this ledger."""
        return next((e for e in self.entries if isinstance(e, StartEntry) and e.run_id == run_id), None)

    def records_run(self, run_id: str) -> bool:
        """Whether any entry records the run `run_id` (see `run_entries`)."""
        return bool(self.run_entries(run_id))

    def superseded_by(self, path: str, at_seq: int | None = None) -> AmendEntry | None:
        """The latest amend entry whose `of` is `path` (the plan was amended), or None; with `at_seq`,
        among the entries up to that seq only (what superseded it by then)."""
        for entry in reversed(self.entries):
            if at_seq is not None and entry.seq > at_seq:
                continue
            if isinstance(entry, AmendEntry) and entry.of == path:
                return entry
        return None

    def relative(self, path: Path) -> str:
        """A file's path relative to the ledger root, as entries record it."""
        try:
            return Path(os.path.abspath(path)).relative_to(os.path.abspath(self.root)).as_posix()
        except ValueError as error:
            raise BadInputError(f"{path} is outside the repository root {self.root}") from error

    def verify(self) -> None:
        """Re-hash every recorded file that still exists against its latest record (every entry's hash
        and link were checked when it was read); VerificationError naming the first broken entry."""
        check_recorded_files(self.path, self.root, self.entries)

    def check_coverage(self, directory: Path) -> None:
        """Every `plan.toml` under `directory` must be in the ledger: one that is not is a draft, or
        the trace of deleted final lines (which the chain alone cannot show)."""
        for plan in sorted(Path(directory).rglob(PLAN_FILE)):
            relative = self.relative(plan)
            if self.latest_for(relative) is None:
                raise VerificationError(
                    f"{self.path}: seq {len(self.entries) + 1}: "
                    f"missing: {relative} has no seal entry and the ledger ends at seq "
                    f"{len(self.entries)} (seal the plan, or restore the ledger's lost last lines)",
                )

    def check_presence(self) -> None:
        """Every file the ledger records is in the checkout as a plain file, reached through no
        symlink: a sealed plan, its companions, and the envelope of every bundled run. (The chain
        re-hashes the files that exist; this catches those deleted, a whole plan directory with them.)"""
        latest: dict[str, Entry] = {}
        for entry in self.entries:
            if entry.kind not in NAMES_A_PLAN:  # it names a plan that has its own record
                latest[entry.path] = entry
        for path, entry in sorted(latest.items(), key=lambda item: item[1].seq):
            where = f"{self.path}: seq {entry.seq}"
            link = symlink_on_path(self.root, path)
            if link is not None:
                raise VerificationError(f"{where}: {path} is reached through the symlink {link}")
            file = self.root / path
            if file.is_file():
                continue
            if isinstance(entry, BundleEntry):
                raise VerificationError(
                    f"{where}: run {entry.run_id or '?'} is recorded as bundled but {path} is missing "
                    "from the checkout (restore the run directory; a signed run is kept with the ledger)"
                )
            gone = file
            while gone.parent != self.root and not gone.parent.exists():
                gone = gone.parent
            missing = path if gone == file else f"{path} (the whole directory {gone.relative_to(self.root)})"
            raise VerificationError(
                f"{where}: {entry.kind} of {path}: {missing} is missing from the checkout "
                "(restore it from git; a sealed file is never deleted, only amended)"
            )
