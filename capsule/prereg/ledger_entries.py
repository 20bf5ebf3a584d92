"""The ledger's entries as frozen types, one per `kind`, and their one JSON form.

`capsule.prereg.ledger` parses each line it reads into one of these (`parse_entry`, after the chain's
checks in `capsule.prereg.chain` have passed on the line's JSON object) and writes each entry it
appends as `entry_bytes`: the canonical JSON of `entry_record`, the base fields and the kind's extras
by name, an optional extra left out while None. Parsing a line and writing the entry again gives
the same bytes (a test checks every committed entry), which the hash chain needs. Nothing outside
the ledger module reads or writes an entry's JSON; everyone else reads these attributes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from capsule.errors import printable
from capsule.hashing import canonical_json, sha256_bytes


@dataclass(frozen=True, kw_only=True)
class _Fields:
    """The fields every entry carries (`capsule.prereg.chain.BASE_FIELDS`). An entry to append is
    built with only `path`, `sha256`, `note` and its kind's own fields (a draft); the append sets its
    place in the chain (`seq`, `prev`), its `time` and its `hash` (`sealed_entry`)."""

    seq: int = 0
    path: str  # repo-relative POSIX: the recorded file, or a run's envelope
    sha256: str  # the file's full hash
    prev: str = ""  # the previous entry's hash (64 zeros for the first)
    time: str = ""  # UTC, ISO-8601 with Z
    note: str
    hash: str = ""  # sha256 of the canonical JSON of every other field


@dataclass(frozen=True, kw_only=True)
class SealEntry(_Fields):
    """A file sealed (a plan, with `companions`: its rationale and controls files by sha256)."""

    companions: dict[str, str] | None = None
    kind: Literal["seal"] = "seal"


@dataclass(frozen=True, kw_only=True)
class AmendEntry(_Fields):
    """A file that amends the sealed `of` (at `of_sha256`); a plan's amend lists its companions."""

    of: str
    of_sha256: str
    companions: dict[str, str] | None = None
    kind: Literal["amend"] = "amend"


@dataclass(frozen=True, kw_only=True)
class RedactEntry(_Fields):
    """A same-length redaction of a sealed file: its sealed hash, where the token was, its sizes."""

    sealed_sha256: str
    offsets: list[int]
    occurrences: int
    token_bytes: int
    file_bytes: int
    kind: Literal["redact"] = "redact"


@dataclass(frozen=True, kw_only=True)
class BundleEntry(_Fields):
    """A run signed here (`capsule.evidence.bundle`): its envelope, run id, key and bundle.json hash."""

    run_id: str | None = None
    key_fingerprint: str | None = None
    bundle_json_sha256: str | None = None
    kind: Literal["bundle"] = "bundle"


@dataclass(frozen=True, kw_only=True)
class SignersEntry(_Fields):
    """Keys added to a sealed plan's trusted signers (`capsule.prereg.signers`)."""

    fingerprints: list[str]
    kind: Literal["signers"] = "signers"


@dataclass(frozen=True, kw_only=True)
class ImportEntry(_Fields):
    """A run made on another machine and imported (`capsule.evidence.importing`)."""

    run_id: str
    key_fingerprint: str
    foreign_entry: str  # the foreign bundle entry's hash
    foreign_seq: int
    foreign_start_seq: int
    seal: str  # the hash of this ledger's plan record that both chains share
    kind: Literal["import"] = "import"


@dataclass(frozen=True, kw_only=True)
class StartEntry(_Fields):
    """A recorded run started here (`capsule reproduce`, `capsule generate --plan`): its plan (path,
    sha256) and run id, appended before the run's first file is written, so the run's start is an
    append of this ledger the run's signer cannot place earlier afterwards. The run's `run.json`
    names this entry's hash as its start head."""

    run_id: str
    kind: Literal["start"] = "start"


Entry = SealEntry | AmendEntry | RedactEntry | BundleEntry | SignersEntry | ImportEntry | StartEntry
PlanRecord = SealEntry | AmendEntry  # an entry that records a plan's (or a companion's) bytes
FileRecord = SealEntry | AmendEntry | RedactEntry  # an entry that fixes a file's bytes
RunRecord = BundleEntry | ImportEntry  # an entry that records a run as finished

ENTRY_TYPES: dict[str, type[Entry]] = {
    cls.kind: cls
    for cls in (SealEntry, AmendEntry, RedactEntry, BundleEntry, SignersEntry, ImportEntry, StartEntry)
}
_BASE = tuple(field.name for field in dataclasses.fields(_Fields))


def required_extras(kind: str) -> tuple[str, ...]:
    """The extra fields an entry of `kind` must carry (beyond the base fields and `kind`)."""
    return tuple(
        f.name for f in dataclasses.fields(ENTRY_TYPES[kind])
        if f.name not in _BASE and f.default is dataclasses.MISSING
    )


def optional_extras(kind: str) -> tuple[str, ...]:
    """The extra fields an entry of `kind` may carry, absent while None."""
    return tuple(
        f.name for f in dataclasses.fields(ENTRY_TYPES[kind])
        if f.name != "kind" and f.default is not dataclasses.MISSING
    )


def parse_entry(record: Mapping[str, Any]) -> Entry:
    """The typed entry of one line's JSON object, which the chain's checks have passed (every base
    field and each extra of its kind present with its type, no other key)."""
    cls = ENTRY_TYPES[record["kind"]]
    return cls(**{name: value for name, value in record.items() if name != "kind"})


def entry_record(entry: Entry) -> dict[str, Any]:
    """An entry as its JSON object: every field by name, an optional extra left out while None."""
    return {
        field.name: getattr(entry, field.name)
        for field in dataclasses.fields(entry)
        if getattr(entry, field.name) is not None
    }


def entry_bytes(entry: Entry) -> bytes:
    """An entry's line in the ledger, without its newline: the canonical JSON of `entry_record`."""
    return canonical_json(entry_record(entry))


def entry_hash(record: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of an entry's JSON object without its `hash` field."""
    return sha256_bytes(canonical_json({k: v for k, v in record.items() if k != "hash"}))


def sealed_entry(draft: Entry, *, seq: int, prev: str, time: str) -> Entry:
    """The draft `draft` placed at `seq` after `prev` at `time`, its hash computed over its JSON object
    (its path and digest checked by the caller, `capsule.prereg.ledger.Ledger.append_all`)."""
    placed = dataclasses.replace(draft, seq=seq, prev=prev, time=time, hash="")
    return dataclasses.replace(placed, hash=entry_hash(entry_record(placed)))


def entry_line(entry: Entry) -> str:
    """One entry in one printable line (`capsule prereg verify`, `seal`, `amend`, ... print these):
    seq, time, kind, path, the hash's first 16 digits and what the kind adds."""
    extra = f"  of {entry.of}" if isinstance(entry, AmendEntry) else ""
    if isinstance(entry, RedactEntry):
        extra = f"  {entry.occurrences} x {entry.token_bytes} bytes, sealed {entry.sealed_sha256[:16]}"
    if isinstance(entry, SignersEntry):
        extra = "  trusts " + ", ".join(f[:16] for f in entry.fingerprints)
    head = f"{entry.seq:>4}  {entry.time}  {entry.kind:<6}"
    return printable(f"{head}  {entry.path}  {entry.sha256[:16]}{extra}")
