"""An arm's sidecar is one frozen type (issue 39, item 3): every committed sidecar parses, a field a
reader relies on missing or mistyped is one error naming it, and no module outside the sidecar's
reader and writer reads one as JSON."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from capsule.generation.arm_sidecar import (
    BatchShare,
    Sidecar,
    SidecarError,
    decode,
    encode,
    load_sidecar,
    write_sidecar,
)
from capsule.jsonio import dumps_document

REPO = Path(__file__).resolve().parents[2]
COMMITTED = sorted((REPO / "results").rglob("generations/*.meta.json"))
OWNERS = {"arm_sidecar.py"}  # the codec: its one reader and writer


def _sidecar() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(COMMITTED[0].read_text())
    return data


def test_every_committed_sidecar_parses_with_its_digest_in_every_segment() -> None:
    assert len(COMMITTED) >= 10
    for path in COMMITTED:
        sidecar = load_sidecar(path)
        assert isinstance(sidecar, Sidecar) and sidecar.status == "complete" and sidecar.segments
        digests = {sidecar.manifest_digest, *(s.manifest_digest for s in sidecar.segments)}
        assert digests == {json.loads(path.read_text())["manifest_digest"]}, path


def test_lane_fields_are_read_typed() -> None:
    data = _sidecar()
    share = {"shares": [1, 3], "of": 4}
    data["segments"][0].update(lane=2, device="cuda:1", batch_share=share, batches=[0, 5])
    sidecar = decode(data)
    assert isinstance(sidecar, Sidecar)
    segment = sidecar.segments[0]
    assert (segment.lane, segment.device, segment.batches) == (2, "cuda:1", (0, 5))
    assert segment.batch_share == BatchShare((1, 3), 4)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d.pop("manifest_digest"), "the sidecar: field 'manifest_digest' is missing"),
        (lambda d: d["segments"][0].pop("manifest_digest"), "segment 1: field 'manifest_digest' is missing"),
        (lambda d: d.update(segments=[]), "field 'segments' is missing or not a list"),
        (lambda d: d.update(status=None), "field 'status' is missing"),
        (lambda d: d.update(elapsed_s="1"), "field 'elapsed_s' '1' is not a number"),
        (lambda d: d["segments"][0].update(lane=0), "segment 1: lane 0 is not a lane number"),
        (lambda d: d["segments"][0].update(lane=True), "lane True is not a lane number"),
        (lambda d: d.update(device=7), "the sidecar: device 7 is not a string"),
        (lambda d: d["segments"][0].update(batch_share={"shares": [3], "of": 2}), "batch_share"),
        (lambda d: d["segments"][0].update(batches=[-1]), "batches [-1] is not a list of batch indices"),
    ],
)
def test_a_field_missing_or_mistyped_is_named(change: Any, words: str) -> None:
    data = _sidecar()
    change(data)
    with pytest.raises(SidecarError, match=words.replace("[", r"\[").replace("]", r"\]")):
        decode(data)


def test_the_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "a.meta.json"
    path.write_text("[]")
    with pytest.raises(Exception, match=f"{path}"):
        load_sidecar(path)


def test_no_module_but_its_reader_and_writer_reads_a_sidecar_as_json() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted((REPO / "capsule").rglob("*.py"))
        if path.name not in OWNERS
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "generations_meta" in line and ("read_json" in line or "write_json" in line)
    ]
    assert offenders == []


def test_every_committed_sidecar_round_trips_byte_for_byte() -> None:
    for path in COMMITTED:
        assert dumps_document(encode(load_sidecar(path))).encode() == path.read_bytes(), path


def test_a_sidecar_written_decodes_to_what_was_written(tmp_path: Path) -> None:
    sidecar = load_sidecar(COMMITTED[0])
    assert isinstance(sidecar, Sidecar)
    segment = replace(sidecar.segments[0], lane=2, batch_share=BatchShare((1,), 2), batches=(0,))
    moved = replace(sidecar, lane=2, device="cuda:1", segments=(segment,))
    write_sidecar(tmp_path / "a.meta.json", moved)
    assert load_sidecar(tmp_path / "a.meta.json") == moved
