"""bundle.json as one frozen type (issue 39, item 3): every committed run's index parses and is
written back byte for byte; a field missing, unknown or of the wrong type is one VerificationError
naming the field, before any listed file is read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from reference_runs import RUNS

from capsule.errors import VerificationError
from capsule.evidence.bundle_index import parse_index, read_index
from capsule.jsonio import dumps_document
from capsule.run_dir import RunDir


@pytest.mark.parametrize("run", RUNS, ids=lambda run: run.name)
def test_every_committed_index_round_trips_byte_for_byte(run: Path) -> None:
    data, index = read_index(run)
    assert dumps_document(index.to_json()).encode("utf-8") == data
    assert index.listed("analysis.json") is not None and index.listed("nowhere") is None
    assert index.total_bytes == sum(item["size"] for item in json.loads(data)["files"])


def _index() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(RunDir(RUNS[0]).bundle.read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda b: b.pop("created"), "field 'created' is missing"),
        (lambda b: b.update(extra=1), "unknown field 'extra'"),
        (lambda b: b["key"].pop("keytype"), "key: field 'keytype' is missing"),
        (lambda b: b["plan"].update(sha256=7), "plan: field 'sha256' is missing or has the wrong type"),
        (lambda b: b["ledger_heads"].update(at_bundle=True), "field 'at_bundle' is missing or has the wrong"),
        (lambda b: b["files"][0].update(size=True), "files[0]: field 'size' is missing or has the wrong"),
        (lambda b: b["files"][0].update(mode="0644"), "files[0]: unknown field 'mode'"),
        (lambda b: b["files"].append(dict(b["files"][0])), "is listed twice"),
        (lambda b: b["files"][0].update(path="../x"), "escapes the run directory"),
        (lambda b: b.update(schema="capsule.bundle/0"), "schema 'capsule.bundle/0'"),
    ],
)
def test_a_malformed_index_is_one_error_naming_the_field(edit: Any, message: str) -> None:
    bundle = _index()
    edit(bundle)
    with pytest.raises(VerificationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_index(bundle, "bundle.json")
