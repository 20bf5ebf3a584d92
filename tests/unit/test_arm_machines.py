"""Which machine generated each arm (lanes on a Ray cluster write each node's manifest to
`nodes/<digest>.json` and name it in the arm's sidecar): `manifest diff --arm` diffs the machines
of one arm in two runs, `compare` lists the arms generated on other nodes with the numerics-relevant
differences between their two machines, and runs of one machine each compare as before."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from capsule.errors import BadInputError
from capsule.evidence import run_manifests
from capsule.evidence.compare import per_arm_machines
from capsule.machine.manifest import build_manifest, manifest_digest, write_manifest
from capsule.report.comparison import _arm_machine_rows
from capsule.run_dir import RunDir


def _run(root: Path, own: dict[str, Any], nodes: list[dict[str, Any]], arms: dict[str, list[int]]) -> RunDir:
    """A run directory with manifest `own`, node manifests `nodes`, and each arm's segments on the
    machines listed by index (0: the run's own, i: nodes[i - 1])."""
    run = RunDir(root)
    run.generations_dir.mkdir(parents=True)
    write_manifest(run.manifest, own)
    machines = [manifest_digest(own)]
    for node in nodes:
        digest = manifest_digest(node)
        run.node_manifest(digest).parent.mkdir(exist_ok=True)
        write_manifest(run.node_manifest(digest), node)
        machines.append(digest)
    run.envelope.write_text("{}")
    for arm, where in arms.items():
        segments = [{"started_at": "t", "manifest_digest": machines[i]} for i in where]
        run.generations_meta(arm).write_text(json.dumps({
            "arm": {}, "identity": {}, "identity_sha256": "i", "plan_hash": "p", "started_at": "t",
            "manifest_digest": machines[where[-1]], "status": "complete", "segments": segments,
        }))
    return run


@pytest.fixture(scope="module")
def machines() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """This machine's manifest, the same machine at another time, and one with another CPU ISA."""
    own = build_manifest(model_dir=None, prompts_path=None)
    later = {**own, "capture": {**own["capture"], "created_at": "2026-12-07T00:00:00Z"}}
    cpu = dict(own["host"]["cpu"])
    cpu["flags"] = [flag for flag in cpu.get("flags", []) if not flag.startswith("avx512")] + ["avx2"]
    other = {**own, "host": {**own["host"], "cpu": cpu}, "capture": later["capture"] | {"elapsed_s": 9.0}}
    return own, later, other


def test_manifest_diff_arm_reads_the_machine_that_generated_the_arm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machines: tuple[dict[str, Any], ...]
) -> None:
    own, node, _ = machines
    run = _run(tmp_path / "run", own, [node], {"here": [0], "there": [1], "both": [1, 0]})
    monkeypatch.setattr(run_manifests, "verify_side", lambda *_: SimpleNamespace(run_id="r", trusted_by="k"))
    assert run_manifests.diff_side(run.path, tmp_path / "ledger", arm="here").manifest == own
    there = run_manifests.diff_side(run.path, tmp_path / "ledger", arm="there")
    assert there.manifest == node and f"Ray node manifest {manifest_digest(node)[:12]}" in there.trust
    with pytest.raises(BadInputError, match="generated on 2 machines"):
        run_manifests.diff_side(run.path, tmp_path / "ledger", arm="both")
    with pytest.raises(BadInputError, match="has no arm 'nowhere'"):
        run_manifests.diff_side(run.path, tmp_path / "ledger", arm="nowhere")
    with pytest.raises(BadInputError, match="give a run directory"):
        run_manifests.diff_side(run.manifest, tmp_path / "ledger", arm="here")


def test_compare_lists_the_arms_made_on_other_nodes_with_what_differs(
    tmp_path: Path, machines: tuple[dict[str, Any], ...]
) -> None:
    own, same, other = machines
    a = _run(tmp_path / "a", own, [other], {"x": [1], "y": [0], "z": [0, 1]})
    b = _run(tmp_path / "b", same, [], {"x": [0], "y": [0], "z": [0]})
    found = per_arm_machines((a, b), ["x", "y", "z"])
    assert [arm.arm for arm in found] == ["x", "z"]  # y ran on each run's own machine
    x, z = found
    assert x.a == f"node {manifest_digest(other)[:12]}" and x.b == "run"
    assert [cause.path for cause in x.causes] and all("cpu" in cause.path for cause in x.causes)
    assert z.a == "2 machines" and z.causes == ()
    rows = _arm_machine_rows(SimpleNamespace(arm_machines=found))  # type: ignore[arg-type]
    assert rows[1].startswith("## Arms generated on other Ray nodes")
    assert "| z | 2 machines | run |" in rows[-1]
    plain = _run(tmp_path / "c", same, [], {"x": [0], "y": [0], "z": [0]})
    assert per_arm_machines((plain, b), ["x", "y", "z"]) == ()
    assert _arm_machine_rows(SimpleNamespace(arm_machines=())) == []  # type: ignore[arg-type]
