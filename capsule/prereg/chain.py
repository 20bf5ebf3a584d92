"""The ledger's chain rules: what makes one entry, and the sequence of them, valid.

`capsule.prereg.ledger` owns the file (load, append, the seal queries); this module owns the
checks `Ledger.verify` runs over its entries: the fields every entry carries, the extras each kind
must or may carry, each entry's hash and its link to the one before, and the rule that a file
changes only by amendment or redaction. Each check is an explicit `raise VerificationError` naming
the entry's seq, never an `assert`.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

from capsule.errors import BadInputError, VerificationError
from capsule.hashing import canonical_json, sha256_bytes, sha256_file

GENESIS = "0" * 64
KINDS = ("seal", "amend", "redact", "bundle")
FILE_KINDS = ("seal", "amend", "redact")  # records that fix a file's bytes
BASE_FIELDS = ("seq", "kind", "path", "sha256", "prev", "time", "note", "hash")
# extras each kind must carry / may carry (bundle extras belong to `capsule.evidence.bundle` and are free)
REQUIRED_EXTRAS = {
    "seal": (),
    "amend": ("of", "of_sha256"),
    "redact": ("sealed_sha256", "offsets", "occurrences", "token_bytes", "file_bytes"),
}
OPTIONAL_EXTRAS = {"seal": ("companions",), "amend": ("companions",), "redact": ()}
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$")


def entry_hash(entry: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of an entry without its `hash` field."""
    return sha256_bytes(canonical_json({k: v for k, v in entry.items() if k != "hash"}))


def check_relpath(path: str) -> str:
    """A repo-relative POSIX path: not absolute, no `..`, no backslashes (BadInputError otherwise)."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or "\\" in path or str(pure) != path:
        raise BadInputError(f"ledger path {path!r} must be a normalized repo-relative POSIX path")
    return path


class _Chain:
    """One pass over a ledger's entries, remembering each path's latest recorded hash."""

    def __init__(self, ledger_path: Path) -> None:
        self.ledger_path = ledger_path
        self.latest: dict[str, str] = {}

    def broken(self, entry: dict[str, Any] | int, what: str) -> VerificationError:
        seq = entry if isinstance(entry, int) else entry.get("seq")
        return VerificationError(f"{self.ledger_path}: seq {seq}: {what}")

    def check_entry(self, number: int, entry: dict[str, Any], prev: str) -> None:
        for field in BASE_FIELDS:
            if field not in entry:
                raise self.broken(number, f"missing field {field!r}")
        if entry["seq"] != number:
            raise self.broken(
                number,
                f"records seq {entry['seq']!r} at position {number} "
                "(a line was deleted, duplicated or moved)",
            )
        if entry["hash"] != entry_hash(entry):
            raise self.broken(
                number,
                f"hash differs: recorded {entry['hash']}, computed {entry_hash(entry)} "
                "(the entry was edited)",
            )
        if entry["prev"] != prev:
            raise self.broken(
                number,
                f"prev differs: recorded {entry['prev']}, previous entry's hash {prev} "
                "(a line before it was deleted, changed or moved)",
            )
        kind = entry["kind"]
        if kind not in KINDS:
            raise self.broken(number, f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
        if not isinstance(entry["sha256"], str) or not SHA256_HEX.match(entry["sha256"]):
            raise self.broken(number, "sha256 must be a full hex digest")
        if not isinstance(entry["time"], str) or not _TIME.match(entry["time"]):
            raise self.broken(number, f"time {entry['time']!r} is not UTC ISO-8601 with Z")
        if not isinstance(entry["note"], str):
            raise self.broken(number, "note must be a string")
        if not isinstance(entry["path"], str):
            raise self.broken(number, f"path must be a string, not {entry['path']!r}")
        try:
            check_relpath(entry["path"])
        except BadInputError as error:
            raise self.broken(number, str(error)) from error
        if kind != "bundle":
            self.check_extras(number, entry)

    def check_extras(self, number: int, entry: dict[str, Any]) -> None:
        kind, path, latest = entry["kind"], entry["path"], self.latest
        extras = set(entry) - set(BASE_FIELDS)
        allowed = set(REQUIRED_EXTRAS[kind]) | set(OPTIONAL_EXTRAS[kind])
        missing = set(REQUIRED_EXTRAS[kind]) - extras
        if missing or extras - allowed:
            raise self.broken(
                number,
                f"{kind} entry fields: missing {sorted(missing)}, unexpected {sorted(extras - allowed)}",
            )
        for field in ("of", "of_sha256", "sealed_sha256"):
            if field in entry and not isinstance(entry[field], str):
                raise self.broken(number, f"{field} must be a string, not {entry[field]!r}")
        companions = entry.get("companions", {})
        if not isinstance(companions, dict) or not all(
            isinstance(name, str) and isinstance(digest, str) for name, digest in companions.items()
        ):
            raise self.broken(number, "companions must map repo-relative paths to sha256 strings")
        if kind == "seal" and path in latest:
            raise self.broken(
                number, f"re-seals {path}, already recorded (a sealed file changes only by amend)"
            )
        if kind == "amend" and latest.get(entry["of"]) != entry["of_sha256"]:
            raise self.broken(
                number,
                f"amends {entry['of']} at sha256 {entry['of_sha256']}, which is not its latest recorded hash",
            )
        if kind == "redact" and latest.get(path) != entry["sealed_sha256"]:
            raise self.broken(
                number,
                f"redacts {path} from sha256 {entry['sealed_sha256']}, which is not its latest recorded hash",
            )
        for companion, digest in companions.items():
            if latest.get(companion) != digest:
                raise self.broken(number, f"companion {companion} sha256 {digest} is not its latest record")


def verify_chain(ledger_path: Path, root: Path, entries: list[dict[str, Any]]) -> None:
    """Recompute every entry's hash and link, then re-hash every recorded file under `root` that still
    exists against its latest record; VerificationError naming the first broken entry."""
    chain = _Chain(ledger_path)
    prev = GENESIS
    last_entry: dict[str, dict[str, Any]] = {}
    for number, entry in enumerate(entries, start=1):
        chain.check_entry(number, entry, prev)
        prev = entry["hash"]
        chain.latest[entry["path"]] = entry["sha256"]
        last_entry[entry["path"]] = entry
    for path, entry in sorted(last_entry.items(), key=lambda item: item[1]["seq"]):
        file = root / path
        if not file.is_file():
            continue
        actual = sha256_file(file)
        if actual != entry["sha256"]:
            hint = "the file changed after it was recorded; restore it, or seal an amendment"
            if entry["kind"] == "redact" and actual == entry["sealed_sha256"]:
                hint = "the redaction was recorded but not applied; run the same redact again"
            raise chain.broken(
                entry,
                f"{entry['kind']} of {path}: file sha256 {actual}, recorded {entry['sha256']} ({hint})",
            )
