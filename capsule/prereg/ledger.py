"""The pre-registration ledger: an append-only sha256 hash chain in `prereg/ledger.jsonl`.

Each line is one entry in canonical JSON (`capsule.hashing.canonical_json`): `seq` (1, 2, ...),
`kind` (seal | amend | redact | bundle), `path` (repo-relative POSIX), `sha256` (the file's full
hash), `prev` (the previous entry's `hash`, 64 zeros for the first), `time` (UTC, ISO-8601 with Z),
`note`, kind-specific extras, and `hash`: sha256 of the canonical JSON of every other field.
Because each line must be byte-identical to its canonical form, any changed, deleted, reordered or
duplicated line breaks the chain at the first entry it touches; `verify` names that entry.

Paths are relative to the repository root, which is the ledger's grandparent (`<root>/prereg/`).
Every check below is an explicit `if ...: raise VerificationError`, never `assert`.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from capsule.errors import BadInputError, VerificationError
from capsule.hashing import canonical_json, sha256_bytes, sha256_file

DEFAULT_LEDGER = Path("prereg/ledger.jsonl")
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
_SHA = re.compile(r"^[0-9a-f]{64}$")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$")


def entry_hash(entry: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of an entry without its `hash` field."""
    return sha256_bytes(canonical_json({k: v for k, v in entry.items() if k != "hash"}))


def utc_now() -> str:
    """Current UTC time, ISO-8601 with a Z, second resolution."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_relpath(path: str) -> str:
    """A repo-relative POSIX path: not absolute, no `..`, no backslashes (BadInputError otherwise)."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or "\\" in path or str(pure) != path:
        raise BadInputError(f"ledger path {path!r} must be a normalized repo-relative POSIX path")
    return path


class Ledger:
    """A loaded ledger: its entries, and the root its paths are relative to."""

    def __init__(self, path: Path, root: Path, entries: list[dict[str, Any]], size: int) -> None:
        self.path, self.root, self.entries, self._size = path, root, entries, size

    @classmethod
    def load(cls, path: Path = DEFAULT_LEDGER, root: Path | None = None) -> Ledger:
        """Read a ledger (an absent file is an empty ledger). Lines that are not JSON objects, or a
        final line without its newline, raise VerificationError naming the entry's seq."""
        path = Path(path)
        root = Path(root) if root is not None else path.resolve().parent.parent
        data = path.read_bytes() if path.exists() else b""
        lines = data.split(b"\n")
        if lines[-1]:
            raise VerificationError(
                f"{path}: seq {len(lines)}: the last line has no newline "
                "(torn or edited); the ledger is only ever appended whole lines"
            )
        entries = []
        for seq, line in enumerate(lines[:-1], start=1):
            try:
                entry = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise VerificationError(
                    f"{path}: seq {seq}: line {seq} is not valid JSON ({error})"
                ) from error
            if not isinstance(entry, dict):
                raise VerificationError(f"{path}: seq {seq}: line {seq} is not a JSON object")
            if canonical_json(entry) != line:
                raise VerificationError(
                    f"{path}: seq {seq}: line {seq} is not in canonical JSON form (its bytes were changed)"
                )
            entries.append(entry)
        return cls(path, root, entries, len(data))

    def head(self) -> str:
        """The hash of the last entry, or 64 zeros for an empty ledger."""
        return str(self.entries[-1]["hash"]) if self.entries else GENESIS

    def latest_for(self, path: str) -> dict[str, Any] | None:
        """The latest seal / amend / redact entry for a repo-relative path, or None."""
        for entry in reversed(self.entries):
            if entry.get("path") == path and entry.get("kind") in FILE_KINDS:
                return entry
        return None

    def superseded_by(self, path: str) -> dict[str, Any] | None:
        """The latest amend entry whose `of` is `path` (the plan was amended), or None."""
        for entry in reversed(self.entries):
            if entry.get("kind") == "amend" and entry.get("of") == path:
                return entry
        return None

    def relative(self, path: Path) -> str:
        """A file's path relative to the ledger root, as entries record it."""
        try:
            return Path(os.path.abspath(path)).relative_to(os.path.abspath(self.root)).as_posix()
        except ValueError as error:
            raise BadInputError(f"{path} is outside the repository root {self.root}") from error

    def _broken(self, entry: dict[str, Any] | int, what: str) -> VerificationError:
        seq = entry if isinstance(entry, int) else entry.get("seq")
        return VerificationError(f"{self.path}: seq {seq}: {what}")

    def _check_entry(self, number: int, entry: dict[str, Any], prev: str, latest: dict[str, str]) -> None:
        for field in BASE_FIELDS:
            if field not in entry:
                raise self._broken(number, f"missing field {field!r}")
        if entry["seq"] != number:
            raise self._broken(
                number,
                f"records seq {entry['seq']!r} at position {number} "
                "(a line was deleted, duplicated or moved)",
            )
        if entry["hash"] != entry_hash(entry):
            raise self._broken(
                number,
                f"hash differs: recorded {entry['hash']}, computed {entry_hash(entry)} "
                "(the entry was edited)",
            )
        if entry["prev"] != prev:
            raise self._broken(
                number,
                f"prev differs: recorded {entry['prev']}, previous entry's hash {prev} "
                "(a line before it was deleted, changed or moved)",
            )
        kind = entry["kind"]
        if kind not in KINDS:
            raise self._broken(number, f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
        if not isinstance(entry["sha256"], str) or not _SHA.match(entry["sha256"]):
            raise self._broken(number, "sha256 must be a full hex digest")
        if not isinstance(entry["time"], str) or not _TIME.match(entry["time"]):
            raise self._broken(number, f"time {entry['time']!r} is not UTC ISO-8601 with Z")
        if not isinstance(entry["note"], str):
            raise self._broken(number, "note must be a string")
        try:
            check_relpath(entry["path"])
        except BadInputError as error:
            raise self._broken(number, str(error)) from error
        if kind != "bundle":
            self._check_extras(number, entry, latest)

    def _check_extras(self, number: int, entry: dict[str, Any], latest: dict[str, str]) -> None:
        kind, path = entry["kind"], entry["path"]
        extras = set(entry) - set(BASE_FIELDS)
        allowed = set(REQUIRED_EXTRAS[kind]) | set(OPTIONAL_EXTRAS[kind])
        missing = set(REQUIRED_EXTRAS[kind]) - extras
        if missing or extras - allowed:
            raise self._broken(
                number,
                f"{kind} entry fields: missing {sorted(missing)}, unexpected {sorted(extras - allowed)}",
            )
        if kind == "seal" and path in latest:
            raise self._broken(
                number, f"re-seals {path}, already recorded (a sealed file changes only by amend)"
            )
        if kind == "amend" and latest.get(entry["of"]) != entry["of_sha256"]:
            raise self._broken(
                number,
                f"amends {entry['of']} at sha256 {entry['of_sha256']}, which is not its latest recorded hash",
            )
        if kind == "redact" and latest.get(path) != entry["sealed_sha256"]:
            raise self._broken(
                number,
                f"redacts {path} from sha256 {entry['sealed_sha256']}, which is not its latest recorded hash",
            )
        for companion, digest in (entry.get("companions") or {}).items():
            if latest.get(companion) != digest:
                raise self._broken(number, f"companion {companion} sha256 {digest} is not its latest record")

    def verify(self) -> None:
        """Recompute every entry's hash and link, then re-hash every recorded file that still exists
        against its latest record; VerificationError naming the first broken entry."""
        prev = GENESIS
        latest: dict[str, str] = {}
        last_entry: dict[str, dict[str, Any]] = {}
        for number, entry in enumerate(self.entries, start=1):
            self._check_entry(number, entry, prev, latest)
            prev = entry["hash"]
            latest[entry["path"]] = entry["sha256"]
            last_entry[entry["path"]] = entry
        for path, entry in sorted(last_entry.items(), key=lambda item: item[1]["seq"]):
            file = self.root / path
            if not file.is_file():
                continue
            actual = sha256_file(file)
            if actual != entry["sha256"]:
                hint = "the file changed after it was recorded; restore it, or seal an amendment"
                if entry["kind"] == "redact" and actual == entry["sealed_sha256"]:
                    hint = "the redaction was recorded but not applied; run the same redact again"
                raise self._broken(
                    entry,
                    f"{entry['kind']} of {path}: file sha256 {actual}, recorded {entry['sha256']} ({hint})",
                )

    def check_coverage(self, directory: Path) -> None:
        """Every `plan.toml` under `directory` must be in the ledger: one that is not is a draft, or
        the trace of deleted final lines (which the chain alone cannot show)."""
        for plan in sorted(Path(directory).rglob("plan.toml")):
            relative = self.relative(plan)
            if self.latest_for(relative) is None:
                raise self._broken(
                    len(self.entries) + 1,
                    f"missing: {relative} has no seal entry and the ledger ends at seq "
                    f"{len(self.entries)} (seal the plan, or restore the ledger's lost last lines)",
                )

    def append(self, kind: str, path: str, sha256: str, note: str, **extra: Any) -> dict[str, Any]:
        """Append one entry durably (one write, fsync) under an exclusive lock; never rewrites a line.
        Refuses if the file changed since this ledger was loaded (someone else appended)."""
        if kind not in KINDS:
            raise BadInputError(f"unknown ledger entry kind {kind!r} (known: {', '.join(KINDS)})")
        if not _SHA.match(sha256):
            raise BadInputError(f"sha256 {sha256!r} is not a full hex digest")
        clash = set(extra) & set(BASE_FIELDS)
        if clash:
            raise BadInputError(f"extra fields {sorted(clash)} would overwrite the entry's own fields")
        entry: dict[str, Any] = {
            "seq": len(self.entries) + 1,
            "kind": kind,
            "path": check_relpath(path),
            "sha256": sha256,
            "prev": self.head(),
            "time": utc_now(),
            "note": note,
            **extra,
        }
        entry["hash"] = entry_hash(entry)
        line = canonical_json(entry) + b"\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        with open(self.path, "ab") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            if os.fstat(handle.fileno()).st_size != self._size:
                raise VerificationError(
                    f"{self.path}: changed since it was loaded (another append?); reload and try again"
                )
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        if created:
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        self.entries.append(entry)
        self._size += len(line)
        return entry


def verify_ledger(path: Path = DEFAULT_LEDGER, root: Path | None = None) -> Ledger:
    """Load and verify a ledger, and check that every plan in its directory is sealed (what
    `capsule prereg verify` runs)."""
    ledger = Ledger.load(path, root)
    ledger.verify()
    ledger.check_coverage(Path(path).parent)
    return ledger


def require_sealed(plan_path: Path, ledger_path: Path = DEFAULT_LEDGER) -> dict[str, Any]:
    """Refuse (VerificationError, exit 3) unless the ledger verifies and the plan's current bytes, and
    its companions' (rationale, controls), match their latest records, and no amendment supersedes
    it. Returns the plan's latest record (seal / amend, or a later redact)."""
    plan_path = Path(plan_path)
    if plan_path.is_dir():
        plan_path = plan_path / "plan.toml"
    ledger = Ledger.load(ledger_path)
    ledger.verify()
    relative = ledger.relative(plan_path)
    latest = ledger.latest_for(relative)
    if latest is None:
        raise VerificationError(
            f"{relative}: not sealed in {ledger_path}; run `capsule prereg seal {relative} "
            "--note ...` before generating"
        )
    if not plan_path.is_file():
        raise VerificationError(f"{relative}: sealed at seq {latest['seq']} but the file is missing")
    actual = sha256_file(plan_path)
    if actual != latest["sha256"]:
        raise VerificationError(
            f"{relative}: sha256 {actual} does not match its seq {latest['seq']} record "
            f"{latest['sha256']}; restore the sealed bytes or seal an amendment"
        )
    amended = ledger.superseded_by(relative)
    if amended is not None:
        raise VerificationError(
            f"{relative}: superseded by {amended['path']} (amend, seq {amended['seq']}); run that plan"
        )
    record = next(
        (e for e in reversed(ledger.entries) if e["path"] == relative and e["kind"] in ("seal", "amend")),
        None,
    )
    if record is None:
        raise VerificationError(f"{relative}: recorded at seq {latest['seq']} but never sealed as a plan")
    for companion in sorted(record.get("companions") or {}):
        companion_latest = ledger.latest_for(companion)
        file = ledger.root / companion
        if companion_latest is None or not file.is_file() or sha256_file(file) != companion_latest["sha256"]:
            raise VerificationError(f"{relative}: its sealed companion {companion} is missing or changed")
    return latest
