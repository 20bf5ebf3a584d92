"""`bundle.json`, the index of a signed run, as one frozen type: parsed once, read by attribute.

`parse_index` is the only reader of the index's JSON and `BundleIndex.to_json` its only writer, so a
field is spelled here and nowhere else. Parsing checks the whole shape before any listed file is
read: every field present and of its type, no unknown field, every listed path a plain relative path
inside the run directory and listed once (`check_member_path`). Any failure is a VerificationError
naming bundle.json and the field (exit 3): an index that does not parse is a run that does not verify.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.errors import CapsuleError, VerificationError
from capsule.jsonio import parse_json, read_input_bytes
from capsule.run_dir import BUNDLE, RunDir

BUNDLE_SCHEMA = "capsule.bundle/1"
_DRIVE = re.compile(r"^[A-Za-z]:")
FIELDS = ("schema", "run_id", "plan", "manifest_digest", "ledger_heads", "key", "created", "files")


@dataclass(frozen=True)
class FileRecord:
    """One bundled file: its path relative to the run directory (POSIX), sha256 and size in bytes."""

    path: str
    sha256: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form used in `bundle.json`."""
        return {"path": self.path, "sha256": self.sha256, "size": self.size}


def check_member_path(value: object, where: str) -> str:
    """Return `value` if it is a plain relative POSIX path inside the run directory, else fail.

    Rejects absolute paths, drive letters, backslashes, NUL, empty, `.` and `..` components, so a
    crafted `bundle.json` can never make the verifier read outside the run directory.
    """
    if not isinstance(value, str) or not value:
        raise VerificationError(f"{where}: file path {value!r} is not a non-empty string")
    if value.startswith("/") or _DRIVE.match(value) or "\\" in value or "\x00" in value:
        raise VerificationError(f"{where}: path {value!r} escapes the run directory (absolute / not POSIX)")
    if any(part in ("", ".", "..") for part in value.split("/")):
        raise VerificationError(f"{where}: path {value!r} escapes the run directory (or is not normalized)")
    return value


@dataclass(frozen=True)
class PlanRef:
    """The plan the run used: its path in the repository and the sha256 of its bytes."""

    path: str
    sha256: str


@dataclass(frozen=True)
class LedgerHeads:
    """The ledger's head when the run started and when it was signed (None: signed without one)."""

    at_start: str
    at_bundle: str | None


@dataclass(frozen=True)
class SignerRef:
    """The signing key: its fingerprint, type, and the public key file beside the index."""

    fingerprint: str
    keytype: str
    public_key_file: str


@dataclass(frozen=True)
class BundleIndex:
    """Every field of bundle.json; `files` in the index's order."""

    run_id: str
    plan: PlanRef
    manifest_digest: str
    ledger_heads: LedgerHeads
    key: SignerRef
    created: str
    files: tuple[FileRecord, ...]
    schema: str = BUNDLE_SCHEMA

    def to_json(self) -> dict[str, Any]:
        """The JSON form written as bundle.json (and repeated in the signed statement's predicate)."""
        return {
            "schema": self.schema,
            "run_id": self.run_id,
            "plan": {"path": self.plan.path, "sha256": self.plan.sha256},
            "manifest_digest": self.manifest_digest,
            "ledger_heads": {
                "at_start": self.ledger_heads.at_start, "at_bundle": self.ledger_heads.at_bundle,
            },
            "key": {"fingerprint": self.key.fingerprint, "keytype": self.key.keytype,
                    "public_key_file": self.key.public_key_file},
            "created": self.created,
            "files": [record.to_dict() for record in self.files],
        }

    def listed(self, path: str) -> FileRecord | None:
        """The bundled file at `path` (relative to the run directory), or None if it is not listed."""
        return next((record for record in self.files if record.path == path), None)

    @property
    def total_bytes(self) -> int:
        """The bundled files' sizes, summed."""
        return sum(record.size for record in self.files)


def _table(value: Any, where: str, fields: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise VerificationError(f"{where}: not a JSON object")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise VerificationError(f"{where}: unknown field {unknown[0]!r} (it holds {', '.join(fields)})")
    return value


def _field(table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = table.get(key)
    if key not in table or not isinstance(value, kind) or isinstance(value, bool):
        raise VerificationError(f"{where}: field {key!r} is missing or has the wrong type")
    return value


def _files(value: Any, where: str) -> tuple[FileRecord, ...]:
    records: list[FileRecord] = []
    seen: set[str] = set()
    for index, item in enumerate(_field({"files": value}, "files", list, where)):
        item_where = f"{where} files[{index}]"
        table = _table(item, item_where, ("path", "sha256", "size"))
        path = check_member_path(_field(table, "path", str, item_where), item_where)
        if path in seen:
            raise VerificationError(f"{item_where}: {path} is listed twice")
        seen.add(path)
        sha256, size = _field(table, "sha256", str, item_where), _field(table, "size", int, item_where)
        records.append(FileRecord(path, sha256, size))
    return tuple(records)


def parse_index(value: Any, where: str) -> BundleIndex:
    """The index `value` (parsed JSON) as a BundleIndex, or VerificationError naming `where` and the
    field that is missing, unknown or of the wrong type."""
    table = _table(value, where, FIELDS)
    schema = _field(table, "schema", str, where)
    if schema != BUNDLE_SCHEMA:
        raise VerificationError(f"{where}: schema {schema!r}, expected {BUNDLE_SCHEMA!r}")
    plan = _table(_field(table, "plan", dict, where), f"{where} plan", ("path", "sha256"))
    heads = _table(_field(table, "ledger_heads", dict, where), f"{where} ledger_heads",
                   ("at_start", "at_bundle"))
    key = _table(_field(table, "key", dict, where), f"{where} key",
                 ("fingerprint", "keytype", "public_key_file"))
    return BundleIndex(
        run_id=_field(table, "run_id", str, where),
        plan=PlanRef(*(_field(plan, name, str, f"{where} plan") for name in ("path", "sha256"))),
        manifest_digest=_field(table, "manifest_digest", str, where),
        ledger_heads=LedgerHeads(
            _field(heads, "at_start", str, f"{where} ledger_heads"),
            _field(heads, "at_bundle", (str, type(None)), f"{where} ledger_heads"),
        ),
        key=SignerRef(*(_field(key, name, str, f"{where} key") for name in ("fingerprint", "keytype",
                                                                            "public_key_file"))),
        created=_field(table, "created", str, where),
        files=_files(table.get("files"), where),
        schema=schema,
    )


def read_index(run_dir: Path) -> tuple[bytes, BundleIndex]:
    """bundle.json's bytes and its parsed index (VerificationError if missing or malformed)."""
    path = RunDir(run_dir).bundle
    if not path.exists():
        raise VerificationError(f"{path}: {BUNDLE} is missing; is this a bundled run directory?")
    data = read_input_bytes(path, BUNDLE, error=VerificationError)
    return data, parse_index(parse_json(data, str(path), error=VerificationError), str(path))


def read_index_or_none(run_dir: Path) -> BundleIndex | None:
    """The run's index, or None when it is missing or does not parse: for the lookups made before a
    run is verified (which run, which plan, which key), where verification then says what is wrong."""
    try:
        return read_index(run_dir)[1]
    except (OSError, CapsuleError):
        return None
