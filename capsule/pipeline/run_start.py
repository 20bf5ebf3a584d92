"""`run.json`: a run's identity, fixed when it starts, as one frozen type.

Written once (`write_run_start`, called by `capsule.pipeline.opening` when a run directory is
created) and read back (`read_run_start`) here alone: every field is required and a string, no other
field is accepted, and the rest of the capsule reads it by attribute. `RunStart.to_json` is its one
serialisation, key for key what every committed run holds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from capsule.atomic import write_json_atomic
from capsule.errors import BadInputError
from capsule.jsonio import read_json_object
from capsule.run_dir import RunDir


@dataclass(frozen=True)
class RunStart:
    """What `run.json` records: the run's id, the plan it was made from (repo-relative path, sha256),
    the ledger head it started at (its `start` entry; "none" for an ad-hoc run), when it started
    (UTC) and the capsule's version."""

    run_id: str
    plan_path: str
    plan_sha256: str
    ledger_head_at_start: str
    started: str
    capsule_version: str

    def to_json(self) -> dict[str, Any]:
        """The JSON object written as `run.json`."""
        return asdict(self)


FIELDS = tuple(field.name for field in fields(RunStart))


def parse_run_start(record: dict[str, Any], where: str) -> RunStart:
    """A `run.json` object as a RunStart; BadInputError naming `where` and the field otherwise."""
    missing = [name for name in FIELDS if name not in record]
    if missing:
        raise BadInputError(f"{where}: missing field '{missing[0]}'; {Path(where).parent} is not a whole run")
    unknown = sorted(set(record) - set(FIELDS))
    if unknown:
        raise BadInputError(f"{where}: unknown field '{unknown[0]}' (known: {', '.join(FIELDS)})")
    for name in FIELDS:
        if not isinstance(record[name], str):
            raise BadInputError(f"{where}: field '{name}' is {type(record[name]).__name__}, not a string")
    return RunStart(**record)


def read_run_start(path: Path) -> RunStart:
    """Load `run.json` of the run directory `path` (BadInputError naming the file if absent or
    malformed)."""
    record_path = RunDir(path).record
    if not record_path.exists():
        raise BadInputError(f"{record_path}: missing; {path} is not a capsule run directory")
    return parse_run_start(read_json_object(record_path, "run record (run.json)"), str(record_path))


def write_run_start(path: Path, record: RunStart) -> None:
    """Write `record` as `run.json` of the run directory `path` (atomically: never half a record)."""
    write_json_atomic(RunDir(path).record, record.to_json())
