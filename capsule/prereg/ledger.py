"""The pre-registration ledger: an append-only sha256 hash chain in `prereg/ledger.jsonl`.

Each line is one entry in canonical JSON (`capsule.hashing.canonical_json`): `seq` (1, 2, ...),
`kind` (seal | amend | redact | bundle | signers | import | start), `path` (repo-relative POSIX), `sha256`
(the file's full hash), `prev` (the previous entry's `hash`, 64 zeros for the first), `time` (UTC,
ISO-8601 with Z), `note`, kind-specific extras, and `hash`: sha256 of the canonical JSON of every other field.
Because each line must be byte-identical to its canonical form, any changed, deleted, reordered or
duplicated line breaks the chain at the first entry it touches; `verify` names that entry.

Paths are relative to the repository root, which is the ledger's grandparent (`<root>/prereg/`).
This module owns the file (load, lock, append) and the checks of a plan against it; its queries (is
this file recorded? which entries record this run? what superseded this plan?) are
`capsule.prereg.ledger_queries`. Each line is parsed into a typed entry
(`capsule.prereg.ledger_entries`) as it is read and written from one, and no other module reads or
writes an entry's JSON. The chain's rules (what a valid entry and sequence are) live in
`capsule.prereg.chain`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from capsule.atomic import write_json_atomic
from capsule.errors import BadInputError, UnavailableError, VerificationError
from capsule.hashing import canonical_json
from capsule.jsonio import parse_json_line, read_input_bytes
from capsule.locks import hold
from capsule.prereg.anchor import AnchorCheck, check_anchor
from capsule.prereg.chain import (
    SHA256_HEX,
    check_relpath,
    verify_links,
)
from capsule.prereg.ledger_entries import (
    AmendEntry,
    BundleEntry,
    Entry,
    ImportEntry,
    RedactEntry,
    SealEntry,
    SignersEntry,
    StartEntry,
    entry_bytes,
    entry_record,
    parse_entry,
    sealed_entry,
)
from capsule.prereg.ledger_queries import LedgerEntries

EntryT = TypeVar("EntryT", SealEntry, AmendEntry, RedactEntry, BundleEntry, SignersEntry, ImportEntry,
                   StartEntry)

__all__ = [
    "DEFAULT_LEDGER",
    "Ledger",
    "utc_now",
    "verify_anchored",
    "verify_ledger",
]


DEFAULT_LEDGER = Path("prereg/ledger.jsonl")
LEDGER_WAIT_S = 30.0  # an append holds the lock for milliseconds, a signing for seconds: wait that long


def utc_now() -> str:
    """Current UTC time, ISO-8601 with a Z, second resolution."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Ledger(LedgerEntries):
    """A loaded ledger: its entries and their queries (`LedgerEntries`), and the file's appends."""

    def __init__(self, path: Path, root: Path, entries: list[Entry], size: int, torn: int = 0) -> None:
        super().__init__(path, root, entries)
        self._size = size
        self.torn = torn  # bytes of a torn last line after the entries (an append that never finished)

    @classmethod
    def load(cls, path: Path = DEFAULT_LEDGER, root: Path | None = None) -> Ledger:
        """Read a ledger (an absent file is an empty ledger) into typed entries. Lines that are not JSON
        objects in canonical form, or that break the chain's rules (`capsule.prereg.chain.verify_links`:
        fields, hashes, links), or a final line without its newline that parses (an edit), raise
        VerificationError naming the entry's seq. A final line without its newline that does not parse
        is a torn append (a full disk, a crash mid-write): it is no entry, is counted in `torn`, and
        the next `append` cuts it."""
        path = Path(path)
        root = Path(root) if root is not None else path.resolve().parent.parent
        if path.is_dir():
            raise BadInputError(f"{path}: is a directory, not a ledger file; give the path of ledger.jsonl")
        data = read_input_bytes(path, "ledger") if path.exists() else b""
        lines = data.split(b"\n")
        torn = 0
        if lines[-1]:
            if not _is_torn(lines[-1]):
                raise VerificationError(
                    f"{path}: seq {len(lines)}: the last line has no newline "
                    "(torn or edited); the ledger is only ever appended whole lines"
                )
            torn = len(lines[-1])
            lines[-1] = b""
        records = []
        for seq, line in enumerate(lines[:-1], start=1):
            try:
                entry = parse_json_line(line, str(path), seq, error=VerificationError)
            except VerificationError as error:
                problem = str(error).removeprefix(f"{path}:{seq}: ")
                raise VerificationError(f"{path}: seq {seq}: line {seq}: {problem}") from None
            if not isinstance(entry, dict):
                raise VerificationError(f"{path}: seq {seq}: line {seq} is not a JSON object")
            if canonical_json(entry) != line:
                raise VerificationError(
                    f"{path}: seq {seq}: line {seq} is not in canonical JSON form (its bytes were changed)"
                )
            records.append(entry)
        verify_links(path, records)
        return cls(path, root, [parse_entry(record) for record in records], len(data) - torn, torn)

    def current(self) -> Ledger:
        """This ledger if its file is unchanged since it was loaded, else the file read afresh (a run
        takes hours, and other plans may have been sealed meanwhile): what to append to."""
        size = self.path.stat().st_size if self.path.exists() else 0
        return self if size == self._size + self.torn else type(self).load(self.path, self.root)

    def record_start(self, plan_path: str, plan_sha256: str, run_id: str) -> str:
        """Append the `start` entry of a new recorded run and return its hash: the run's start head."""
        entry = self.append(StartEntry(path=plan_path, sha256=plan_sha256, note=f"run {run_id} started",
                                       run_id=run_id))
        return entry.hash

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the ledger's lock (`capsule.locks`, on its directory) for a `with` block: one writer
        at a time. Waits up to LEDGER_WAIT_S for another writer, then BusyError naming its pid."""
        with hold(self.path.parent, f"ledger {self.path}", wait_s=LEDGER_WAIT_S):
            yield

    def append(self, draft: EntryT) -> EntryT:
        """Append one entry durably (one write, fsync) under the ledger's lock; see `append_all`.
        The entry appended is of the draft's kind."""
        appended = self.append_all([draft])[0]
        assert isinstance(appended, type(draft))
        return appended

    def append_all(self, drafts: list[Entry]) -> list[Entry]:
        """Append `drafts` (entries built with their path, sha256, note and kind's fields; see
        `capsule.prereg.ledger_entries`) chained one after the other as ONE write (fsync) under the
        ledger's lock, so either all of them are in the ledger or none is (a seal: its companions and
        the plan). Never rewrites a line; cuts a torn last line first (`load`). Refuses if the file
        changed since this ledger was loaded (someone else appended); a failed write (a full disk) is
        cut back and raised as UnavailableError, the ledger as it was."""
        entries: list[Entry] = []
        head = self.head()
        for draft in drafts:
            entry = self._entry(len(self.entries) + len(entries) + 1, head, draft)
            entries.append(entry)
            head = entry.hash
        data = b"".join(entry_bytes(entry) + b"\n" for entry in entries)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        with self.locked(), open(self.path, "ab") as handle:
            if os.fstat(handle.fileno()).st_size != self._size + self.torn:
                raise VerificationError(
                    f"{self.path}: changed since it was loaded (another append?); reload and try again"
                )
            try:
                if self.torn:
                    os.ftruncate(handle.fileno(), self._size)  # the torn append is no entry
                    self.torn = 0
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            except OSError as error:
                self._cut_back(handle)
                raise UnavailableError(
                    f"{self.path}: cannot append {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} "
                    f"({error.strerror or error}); nothing was appended, the ledger is as it was: "
                    "free space and run the command again"
                ) from None
        if created:
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        self.entries.extend(entries)
        self._size += len(data)
        return entries

    def _cut_back(self, handle: Any) -> None:
        """After a failed write: cut the file back to its entries (what a partial write left is no
        entry); where even that fails, the torn line left is cut by the next append."""
        try:
            handle.flush()
        except OSError:
            pass  # the buffered bytes are lost with the handle: that is the point
        try:
            os.ftruncate(handle.fileno(), self._size)
            os.fsync(handle.fileno())
        except OSError:
            self.torn = max(0, os.fstat(handle.fileno()).st_size - self._size)

    def _entry(self, seq: int, prev: str, draft: Entry) -> Entry:
        """The draft placed at `seq` after `prev`, its digest and path checked and its hash set."""
        if not SHA256_HEX.match(draft.sha256):
            raise BadInputError(f"sha256 {draft.sha256!r} is not a full hex digest")
        checked = dataclasses.replace(draft, path=check_relpath(draft.path))
        return sealed_entry(checked, seq=seq, prev=prev, time=utc_now())


def _is_torn(last: bytes) -> bool:
    """Whether a final line without its newline is a torn append rather than an edit: what a write cut
    short leaves, the start of an entry's JSON object and no complete JSON value (an entry whose
    newline was changed or removed still decodes, and is refused as an edit). Read as latin-1, which
    decodes every byte, so that a newline flipped into a non-ASCII byte leaves a complete value plus
    one byte (an edit), and a write cut inside a multi-byte character leaves no complete value."""
    if not last.startswith(b"{"):
        return False
    try:
        json.JSONDecoder().raw_decode(last.decode("latin-1"))
    except ValueError:  # no complete value: the write stopped before the entry's end
        return True
    return False


def write_entry_copy(path: Path, entry: Entry) -> None:
    """Write one entry as its own JSON document (a run's copy of its plan's seal entry), atomically,
    key-sorted like every JSON document the capsule writes."""
    write_json_atomic(path, entry_record(entry))


def verify_ledger(path: Path = DEFAULT_LEDGER, root: Path | None = None) -> Ledger:
    """Load and verify a ledger, check that every file it records is present (plainly), and that every
    plan in its directory is sealed. A ledger file that does not exist, or holds no entry (and no plan
    beside it), is an error (BadInputError)."""
    path = Path(path)
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise BadInputError(f"ledger {path} {what}; run from the repository root or pass --ledger PATH")
    ledger = Ledger.load(path, root)
    ledger.verify()
    ledger.check_presence()
    ledger.check_coverage(path.parent)  # an empty ledger beside plans: those plans are unsealed
    if not ledger.entries:
        raise BadInputError(
            f"ledger {path} holds no entry; give --ledger the ledger.jsonl plans were "
            "sealed in (an empty one has nothing to verify)"
        )
    return ledger


def verify_anchored(
    path: Path = DEFAULT_LEDGER, anchor: str | None = None, root: Path | None = None
) -> tuple[Ledger, AnchorCheck]:
    """`verify_ledger`, then the anchor check (`capsule.prereg.anchor`): every entry of the ledger at
    `anchor` (a git revision or a head hash; default `HEAD` inside a git checkout) still in place.
    What `capsule prereg verify` runs."""
    ledger = verify_ledger(path, root)
    return ledger, check_anchor(Path(path), Path(path).read_bytes(), ledger.hashes(), anchor)
