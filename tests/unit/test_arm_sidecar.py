"""An arm's sidecar is one frozen type (issue 39, item 3): every committed sidecar parses, a field a
reader relies on missing or mistyped is one error naming it, and no module outside the sidecar's
reader and writer reads one as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from capsule.generation.arm_sidecar import BatchShare, SidecarError, load_sidecar, parse_sidecar

REPO = Path(__file__).resolve().parents[2]
COMMITTED = sorted((REPO / "results").rglob("generations/*.meta.json"))
OWNERS = {"arm_sidecar.py", "store.py"}  # the reader, and the writer


def _sidecar() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(COMMITTED[0].read_text())
    return data


def test_every_committed_sidecar_parses_with_its_digest_in_every_segment() -> None:
    assert len(COMMITTED) >= 10
    for path in COMMITTED:
        sidecar = load_sidecar(path)
        assert sidecar.status == "complete" and sidecar.segments and sidecar.top is not None
        digests = {sidecar.top.manifest_digest, *(s.manifest_digest for s in sidecar.segments)}
        assert digests == {json.loads(path.read_text())["manifest_digest"]}, path


def test_lane_fields_are_read_typed() -> None:
    data = _sidecar()
    share = {"shares": [1, 3], "of": 4}
    data["segments"][0].update(lane=2, device="cuda:1", batch_share=share, batches=[0, 5])
    segment = parse_sidecar(data).segments[0]
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
        parse_sidecar(data)


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
        if "read_json" in line and "generations_meta" in line or "read_sidecar(" in line
    ]
    assert offenders == []
