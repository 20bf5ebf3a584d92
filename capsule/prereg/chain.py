"""The ledger's chain rules: what makes one entry, and the sequence of them, valid.

`capsule.prereg.ledger` owns the file (load, append, the seal queries); this module owns the
checks it runs: on each line's JSON object as it is read (`verify_links`: the fields every entry
carries, the extras each kind must or may carry, each entry's hash and its link to the one before,
and the rule that a file changes only by amendment or redaction), and on the typed entries against
the checkout (`check_recorded_files`, what `Ledger.verify` adds). Each check is an explicit
`raise VerificationError` naming the entry's seq, never an `assert`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from capsule.errors import BadInputError, VerificationError
from capsule.hashing import sha256_file
from capsule.prereg.ledger_entries import (
    ENTRY_TYPES,
    Entry,
    RedactEntry,
    entry_hash,
    optional_extras,
    required_extras,
)

GENESIS = "0" * 64
KINDS = tuple(ENTRY_TYPES)  # seal, amend, redact, bundle, signers, import, start
FILE_KINDS = ("seal", "amend", "redact")  # records that fix a file's bytes
RUN_KINDS = ("bundle", "import")  # records that a run is finished: signed here, or imported from elsewhere
# `signers`: keys added to a sealed plan's trusted signers (`capsule.prereg.signers`); its `sha256` is
# the plan's latest recorded hash, so it names the exact plan bytes it amends the trust of.
# `start`: a recorded run started, of the plan at `path` with the bytes `sha256` (its latest record)
NAMES_A_PLAN = ("signers", "start")  # kinds whose path is a sealed plan, not a file they fix
BASE_FIELDS = ("seq", "kind", "path", "sha256", "prev", "time", "note", "hash")
# extras each kind must carry / may carry: the fields of its type in `capsule.prereg.ledger_entries`.
# An `import` entry records a run made on another machine and chained in that machine's ledger
# (`capsule.evidence.importing`): its envelope (path, sha256), run id, signer, the foreign `bundle`
# entry's hash and seq, the foreign start head's seq, and `seal`: the hash of this ledger's plan
# record that both chains share.
REQUIRED_EXTRAS = {kind: required_extras(kind) for kind in KINDS}
OPTIONAL_EXTRAS = {kind: optional_extras(kind) for kind in KINDS}
PLAN_RECORD_KINDS = ("seal", "amend")
_INT_EXTRAS = ("occurrences", "token_bytes", "file_bytes", "foreign_seq", "foreign_start_seq")
_SHA_EXTRAS = ("of_sha256", "sealed_sha256", "foreign_entry", "seal", "key_fingerprint", "bundle_json_sha256")
_STR_EXTRAS = ("run_id",)
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$")


def is_int(value: object) -> bool:
    """A JSON integer, not a bool (`True` is an int in Python, `seq: true` is not a seq)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_sha256(value: object) -> bool:
    """A full lowercase hex sha256 string."""
    return isinstance(value, str) and SHA256_HEX.match(value) is not None


def symlink_on_path(root: Path, relative: str) -> Path | None:
    """The first component of `root / relative` below `root` that is a symlink, else None: a sealed
    file is checked where the ledger says it is, never through a link that could point anywhere."""
    current = root
    for part in PurePosixPath(relative).parts:
        current = current / part
        if current.is_symlink():
            return current
    return None


def check_relpath(path: str) -> str:
    """A repo-relative POSIX path: not absolute, no `..`, no backslashes (BadInputError otherwise)."""
    if not isinstance(path, str):
        raise BadInputError(f"ledger path {path!r} must be a string")
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or "\\" in path or str(pure) != path:
        raise BadInputError(f"ledger path {path!r} must be a normalized repo-relative POSIX path")
    return path


class _Chain:
    """One pass over a ledger's entries, remembering each path's latest recorded hash."""

    def __init__(self, ledger_path: Path) -> None:
        self.ledger_path = ledger_path
        self.latest: dict[str, str] = {}
        self.plan_records: set[str] = set()  # hashes of the seal / amend entries seen so far
        self.plans: set[str] = set()  # paths recorded as plans (a seal / amend listing companions)
        self.files: set[str] = set()  # paths whose bytes a seal / amend / redact fixed
        self.self_amends: dict[str, int] = {}  # companion path -> seq of its amend, until a plan names it

    def broken(self, entry: Mapping[str, Any] | int, what: str) -> VerificationError:
        seq = entry if isinstance(entry, int) else entry.get("seq")
        return VerificationError(f"{self.ledger_path}: seq {seq}: {what}")

    def check_entry(self, number: int, entry: Mapping[str, Any], prev: str) -> None:
        for field in BASE_FIELDS:
            if field not in entry:
                raise self.broken(number, f"missing field {field!r}")
        if not is_int(entry["seq"]):
            raise self.broken(number, f"seq {entry['seq']!r} is not an integer")
        for field in ("kind", "prev", "hash"):
            if not isinstance(entry[field], str):
                raise self.broken(number, f"{field} {entry[field]!r} is not a string")
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
        if not is_sha256(entry["sha256"]):
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
        if kind in RUN_KINDS and entry["path"] in self.files:
            raise self.broken(
                number,
                f"{kind} entry records {entry['path']}, a sealed file, as a run's envelope (a sealed file "
                "is re-recorded only by an amend of another path)",
            )
        self.check_extras(number, entry)

    def check_extras(self, number: int, entry: Mapping[str, Any]) -> None:
        kind, path, latest = entry["kind"], entry["path"], self.latest
        extras = set(entry) - set(BASE_FIELDS)
        allowed = set(REQUIRED_EXTRAS[kind]) | set(OPTIONAL_EXTRAS[kind])
        missing = set(REQUIRED_EXTRAS[kind]) - extras
        if missing or extras - allowed:
            raise self.broken(
                number,
                f"{kind} entry fields: missing {sorted(missing)}, unexpected {sorted(extras - allowed)}",
            )
        self.check_extra_types(number, entry)
        if kind == "seal" and path in latest:
            raise self.broken(
                number, f"re-seals {path}, already recorded (a sealed file changes only by amend)"
            )
        if kind == "amend":
            self.check_amend_target(number, entry)
        if kind == "amend" and latest.get(entry["of"]) != entry["of_sha256"]:
            raise self.broken(
                number,
                f"amends {entry['of']} at sha256 {entry['of_sha256']}, which is not its latest recorded hash",
            )
        if kind == "redact" and (path not in self.files or latest.get(path) != entry["sealed_sha256"]):
            raise self.broken(
                number,
                f"redacts {path} from sha256 {entry['sealed_sha256']}, which is not its latest recorded hash",
            )
        if kind == "import" and entry["seal"] not in self.plan_records:
            raise self.broken(
                number, f"imports against seal {entry['seal']}, which is no earlier seal or amend entry"
            )
        if kind in NAMES_A_PLAN and (path not in self.plans or latest.get(path) != entry["sha256"]):
            raise self.broken(
                number,
                f"{kind} entry for {path} at sha256 {entry['sha256']}, which is not a sealed plan's "
                "latest recorded hash",
            )
        for companion, digest in (entry.get("companions") or {}).items():
            if latest.get(companion) != digest:
                raise self.broken(number, f"companion {companion} sha256 {digest} is not its latest record")
            self.self_amends.pop(companion, None)
        if "companions" in entry:
            self.plans.add(path)

    def check_amend_target(self, number: int, entry: Mapping[str, Any]) -> None:
        """An amend records a new file, or (`of` its own path) a plan's changed companion, which the
        amend of another path that follows must list: a sealed plan, or a file already recorded, is
        never re-recorded in place."""
        path = entry["path"]
        if path != entry["of"]:
            if path in self.latest:
                raise self.broken(
                    number, f"amend records {path}, already recorded (an amendment is a new file)"
                )
            return
        if path in self.plans or path not in self.files:
            raise self.broken(
                number,
                f"amends {path} in place: only a plan's companion is amended in place, and a sealed plan "
                "is re-recorded only by an amend of another path",
            )
        self.self_amends[path] = number

    def check_closed(self) -> None:
        """Every companion amended in place was named by the amend of its plan that followed."""
        if self.self_amends:
            path, seq = min(self.self_amends.items(), key=lambda item: item[1])
            raise self.broken(
                seq,
                f"amends {path} in place, but no amend of a plan that follows lists it as a companion "
                "(a sealed file is re-recorded only by an amend of another path)",
            )

    def check_extra_types(self, number: int, entry: Mapping[str, Any]) -> None:
        """Each extra field has its one JSON type (a wrong type is a broken entry, never a traceback)."""
        for field in _INT_EXTRAS:
            if field in entry and not (is_int(entry[field]) and entry[field] >= 0):
                raise self.broken(number, f"{field} {entry[field]!r} is not a non-negative integer")
        for field in _SHA_EXTRAS:
            if field in entry and not is_sha256(entry[field]):
                raise self.broken(number, f"{field} must be a full hex digest")
        for field in _STR_EXTRAS:
            if field in entry and not isinstance(entry[field], str):
                raise self.broken(number, f"{field} {entry[field]!r} is not a string")
        if "of" in entry:
            try:
                check_relpath(entry["of"])
            except BadInputError as error:
                raise self.broken(number, f"of: {error}") from error
        offsets = entry.get("offsets", [])
        if not isinstance(offsets, list) or not all(is_int(o) and o >= 0 for o in offsets):
            raise self.broken(number, "offsets must be a list of non-negative integers")
        companions = entry.get("companions", {})
        if not isinstance(companions, dict) or not all(is_sha256(d) for d in companions.values()):
            raise self.broken(number, "companions must map paths to full hex digests")
        fingerprints = entry.get("fingerprints", ["0" * 64])
        if (
            not isinstance(fingerprints, list)
            or not fingerprints
            or not all(is_sha256(f) for f in fingerprints)
            or len(set(fingerprints)) != len(fingerprints)
        ):
            raise self.broken(number, "fingerprints must be a non-empty list of distinct key fingerprints")


def verify_links(ledger_path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    """Check each line's JSON object as `capsule.prereg.ledger` reads it, before it becomes a typed
    entry: every field and its type, each kind's extras, every hash and link, and the rules between
    entries; reading no recorded file (what a ledger from another machine can be checked for).
    VerificationError naming the first broken entry."""
    chain = _Chain(ledger_path)
    prev = GENESIS
    for number, record in enumerate(records, start=1):
        chain.check_entry(number, record, prev)
        prev = record["hash"]
        chain.latest[record["path"]] = record["sha256"]
        if record["kind"] in FILE_KINDS:
            chain.files.add(record["path"])
        if record["kind"] in PLAN_RECORD_KINDS:
            chain.plan_records.add(record["hash"])
    chain.check_closed()


def check_recorded_files(ledger_path: Path, root: Path, entries: Sequence[Entry]) -> None:
    """Re-hash every recorded file under `root` that still exists against its latest record (the
    chain itself was checked when the ledger was read); VerificationError naming the first broken
    entry."""
    # a file is re-hashed against the record that fixed its bytes (a signers entry only names a plan)
    last_entry = {entry.path: entry for entry in entries if entry.kind not in NAMES_A_PLAN}
    for path, entry in sorted(last_entry.items(), key=lambda item: item[1].seq):
        where = f"{ledger_path}: seq {entry.seq}"
        file = root / path
        link = symlink_on_path(root, path)
        if link is not None:
            raise VerificationError(
                f"{where}: {path} is reached through the symlink {link}; restore the plain file"
            )
        if not file.is_file():
            continue
        actual = sha256_file(file)
        if actual != entry.sha256:
            hint = "the file changed after it was recorded; restore it, or seal an amendment"
            if isinstance(entry, RedactEntry) and actual == entry.sealed_sha256:
                hint = "the redaction was recorded but not applied; run the same redact again"
            raise VerificationError(
                f"{where}: {entry.kind} of {path}: file sha256 {actual}, recorded {entry.sha256} ({hint})"
            )
