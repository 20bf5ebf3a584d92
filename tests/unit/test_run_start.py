"""run.json is one frozen type (issue 39, item 3): every committed run's record round-trips byte for
byte through `RunStart`, and a record with a field missing, unknown or not a string is one error
naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capsule.errors import BadInputError
from capsule.jsonio import dumps_document
from capsule.pipeline.run_start import FIELDS, read_run_start

REPO = Path(__file__).resolve().parents[2]
COMMITTED = sorted((REPO / "results").rglob("run.json"))


def test_there_are_committed_runs_to_check() -> None:
    assert len(COMMITTED) >= 2


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.parent.name)
def test_every_committed_run_record_round_trips_byte_for_byte(path: Path) -> None:
    record = read_run_start(path.parent)
    assert dumps_document(record.to_json()).encode() == path.read_bytes()


def _record(tmp_path: Path, **changes: object) -> Path:
    record: dict[str, object] = json.loads(COMMITTED[0].read_text())
    record.update(changes)
    for name, value in changes.items():
        if value is None:
            del record[name]
    (tmp_path / "run.json").write_text(json.dumps(record))
    return tmp_path


@pytest.mark.parametrize("name", FIELDS)
def test_a_missing_field_is_named(tmp_path: Path, name: str) -> None:
    with pytest.raises(BadInputError, match=f"run.json: missing field '{name}'"):
        read_run_start(_record(tmp_path, **{name: None}))


def test_an_unknown_field_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="run.json: unknown field 'ledger_head'"):
        read_run_start(_record(tmp_path, ledger_head="0" * 64))


def test_a_field_of_another_type_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="field 'run_id' is int, not a string"):
        read_run_start(_record(tmp_path, run_id=7))


def test_a_directory_without_a_record_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="is not a capsule run directory"):
        read_run_start(tmp_path)


def test_no_module_but_its_codec_reads_run_json() -> None:
    """Every reader goes through `read_run_start`: no other line of capsule/ hands run.json (a run's
    `record`, or a path described as its run record) to a JSON reader."""
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted((REPO / "capsule").rglob("*.py"))
        if path.name != "run_start.py"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "read_json" in line and (".record" in line or "run record" in line)
    ]
    assert offenders == []
