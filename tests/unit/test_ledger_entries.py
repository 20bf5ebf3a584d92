"""Typed ledger entries: every committed entry parses into its kind's type and writes back byte for
byte (the hash chain depends on it), and an entry's JSON holds exactly its type's fields."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from capsule.errors import VerificationError
from capsule.hashing import canonical_json
from capsule.prereg.chain import GENESIS, entry_hash
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import (
    ENTRY_TYPES,
    BundleEntry,
    ImportEntry,
    SealEntry,
    SignersEntry,
    entry_bytes,
    entry_line,
    parse_entry,
)

REPO = Path(__file__).resolve().parents[2]
LEDGER = REPO / "prereg" / "ledger.jsonl"
LINES = LEDGER.read_bytes().split(b"\n")[:-1]


@pytest.mark.parametrize("seq", range(1, len(LINES) + 1))
def test_every_committed_entry_round_trips_byte_for_byte(seq: int) -> None:
    line = LINES[seq - 1]
    entry = parse_entry(json.loads(line))
    assert type(entry) is ENTRY_TYPES[entry.kind] and entry.seq == seq
    assert entry_bytes(entry) == line


def test_the_loaded_ledger_writes_back_its_own_bytes() -> None:
    ledger = Ledger.load(LEDGER, REPO)
    assert b"".join(entry_bytes(entry) + b"\n" for entry in ledger.entries) == LEDGER.read_bytes()
    kinds = {entry.kind for entry in ledger.entries}
    assert {"seal", "amend", "bundle", "signers", "import"} <= kinds  # the committed ledger has each
    assert all(dataclasses.is_dataclass(e) and e.__dataclass_params__.frozen for e in ledger.entries)  # type: ignore[attr-defined]


def test_the_ledger_answers_run_and_supersession_queries() -> None:
    ledger = Ledger.load(LEDGER, REPO)
    imports = [e for e in ledger.entries if isinstance(e, ImportEntry)]  # committed, and any of yours
    assert imports
    for imported in imports:
        assert imported in ledger.run_entries(imported.run_id) and ledger.records_run(imported.run_id)
    bundled = next(e for e in ledger.entries if isinstance(e, BundleEntry))
    assert bundled.run_id is not None and bundled in ledger.bundle_entries(bundled.run_id, bundled.sha256)
    amend = ledger.superseded_by("prereg/smollm2-135m/plan.toml")
    assert amend is not None and amend.of == "prereg/smollm2-135m/plan.toml"
    assert ledger.superseded_by("prereg/smollm2-135m/plan.toml", at_seq=amend.seq - 1) is None
    assert ledger.with_hash(amend.hash) == amend and ledger.with_hash("0" * 64) is None


def _write(path: Path, records: list[dict[str, object]]) -> None:
    prev, lines = GENESIS, []
    for seq, record in enumerate(records, start=1):
        record = {**record, "seq": seq, "prev": prev}
        record["hash"] = prev = entry_hash(record)
        lines.append(canonical_json(record) + b"\n")
    path.write_bytes(b"".join(lines))


BASE = {
    "kind": "bundle", "path": "runs/x/bundle.dsse.json", "sha256": "1" * 64, "time": "2026-01-01T00:00:00Z",
    "note": "n",
}


def test_a_bundle_entry_carries_only_its_types_fields(tmp_path: Path) -> None:
    ledger = tmp_path / "prereg" / "ledger.jsonl"
    ledger.parent.mkdir()
    _write(ledger, [{**BASE, "run_id": "r", "key_fingerprint": "2" * 64, "bundle_json_sha256": "3" * 64}])
    (entry,) = Ledger.load(ledger).entries
    assert isinstance(entry, BundleEntry) and entry.run_id == "r" and "bundle" in entry_line(entry)
    _write(ledger, [{**BASE, "run_id": "r", "ledger_head": "4" * 64}])
    with pytest.raises(VerificationError, match=r"seq 1: bundle entry fields: .* \['ledger_head'\]"):
        Ledger.load(ledger)
    _write(ledger, [{**BASE, "run_id": 7}])
    with pytest.raises(VerificationError, match="seq 1: run_id 7 is not a string"):
        Ledger.load(ledger)


def test_an_entry_is_built_with_its_kinds_fields_only(tmp_path: Path) -> None:
    """A draft is a typed entry: a field its kind does not have, or one it lacks, cannot be built."""
    ledger = Ledger.load(tmp_path / "prereg" / "ledger.jsonl")
    with pytest.raises(TypeError, match="'of'"):
        SealEntry(path="a.txt", sha256="0" * 64, note="x", of="b.txt")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'fingerprints'"):
        SignersEntry(path="a.txt", sha256="0" * 64, note="x")  # type: ignore[call-arg]
    entry = ledger.append(SealEntry(path="a.txt", sha256="0" * 64, note="x"))
    assert isinstance(entry, SealEntry) and entry.companions is None and entry.hash == ledger.head()
