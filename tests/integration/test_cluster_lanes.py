"""`reproduce --lanes 2 --cluster` on a two-node Ray cluster on 127.0.0.1: a head and one worker
node started here, each with one CPU and its own custom resource standing for a hardware kind
("hw-a", "hw-b"), so each lane lands on its own node. The smoke plan, as a dry run: rows equal to
the sequential run's, each arm's sidecar naming the node it ran on, the worker node's manifest in
the run, the bundle verifying (and refused, signed again, without that manifest or with it edited);
a lane's worker killed mid-arm loses no row and the rerun resumes.
Slow (the cluster, and a driver process per run); the cluster is shared by the module, whose
tests `make test` keeps on one pytest-xdist worker (`--dist loadfile`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from capsule.cluster.ray_runtime import LOCAL_ENV
from capsule.errors import VerificationError
from capsule.evidence.signing import generate_signer
from capsule.evidence.verify import verify_run
from capsule.faults import KILL_AT_ENV
from capsule.pipeline.resign import sign_again
from capsule.run_dir import PUBLIC_KEY

pytestmark = [pytest.mark.slow]  # one cluster: `make test-slow` keeps a file on one worker (--dist loadfile)
SMOKE = "prereg/smoke-v2"
TIMING = ("elapsed_s",)
HARDWARE_ARMS = ("hf-fp32-b1", "hf-fp32-b4")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head (hw-a) and a worker node (hw-b) on 127.0.0.1, one CPU each, nothing beyond loopback."""
    for name, value in LOCAL_ENV.items():
        os.environ.setdefault(name, value)
    from ray.cluster_utils import Cluster

    started = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"hw-a": 1}, "include_dashboard": False,
                        "object_store_memory": 80 * 2**20},
    )
    try:
        started.add_node(num_cpus=1, resources={"hw-b": 1}, object_store_memory=80 * 2**20)
        started.wait_for_nodes()
        yield started
    finally:
        started.shutdown()


def _reproduce(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "capsule", "reproduce", "--no-progress", "--plan", SMOKE, "--dry-run"]
    command += args
    return subprocess.run(
        command, cwd=repo, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
    )


def _rows(run: Path) -> dict[str, list[dict[str, Any]]]:
    rows = {}
    for path in sorted((run / "generations").glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        rows[path.stem] = sorted(
            ({k: v for k, v in row.items() if k not in TIMING} for row in lines), key=lambda row: row["key"]
        )
    return rows


def _run_dir(root: Path) -> Path:
    (run,) = (root / "smoke").iterdir()
    return run


def test_two_nodes_run_one_lane_each_and_the_run_verifies(
    cluster: Any, repo_copy: Path, tmp_path: Path
) -> None:
    sequential = _reproduce(repo_copy, "--results", str(tmp_path / "one"))
    assert sequential.returncode == 0, sequential.stderr
    laned = _reproduce(
        repo_copy, "--results", str(tmp_path / "two"), "--lanes", "2", "--cluster", cluster.address
    )
    assert laned.returncode == 0, laned.stderr
    run = _run_dir(tmp_path / "two")
    assert _rows(run) == _rows(_run_dir(tmp_path / "one"))
    nodes_of: dict[str, set[str]] = {}
    digests: set[str] = set()
    for meta_path in (run / "generations").glob("*.meta.json"):
        meta = json.loads(meta_path.read_text())
        nodes_of[meta_path.name] = {segment["node"] for segment in meta["segments"]}
        digests |= {segment["manifest_digest"] for segment in meta["segments"]}
    assert len(set().union(*nodes_of.values())) == 2, nodes_of  # both nodes ran a lane
    assert all(len(nodes) == 1 for nodes in nodes_of.values())  # an unsplit arm ran on one node
    held = {path.stem for path in (run / "nodes").glob("*.json")}
    assert len(held) == 1 and held <= digests  # the other node's manifest, recorded by its lane
    verify_run(run, pubkey=run / PUBLIC_KEY, ledger_path=None)  # a dry run is in no ledger
    _refused_without_its_node_manifest(run, tmp_path / "forged", *held)


def _refused_without_its_node_manifest(run: Path, forged: Path, digest: str) -> None:
    """Signed again without the worker node's manifest, or with it edited, the run is refused."""
    shutil.copytree(run, forged)
    (forged / "nodes" / f"{digest}.json").unlink()
    sign_again(forged, key=generate_signer(), ledger=None)
    with pytest.raises(VerificationError, match=f"generated on machine fingerprint {digest}, not this run's"):
        verify_run(forged, pubkey=forged / PUBLIC_KEY, ledger_path=None)
    edited = json.loads((run / "nodes" / f"{digest}.json").read_text())
    edited["capture"]["elapsed_s"] = 0.0
    (forged / "nodes" / f"{digest}.json").write_text(json.dumps(edited))
    sign_again(forged, key=generate_signer(), ledger=None)
    with pytest.raises(VerificationError, match="not the one its name says"):
        verify_run(forged, pubkey=forged / PUBLIC_KEY, ledger_path=None)


def test_a_lane_killed_mid_arm_on_the_cluster_loses_nothing_and_the_rerun_resumes(
    cluster: Any, repo_copy: Path, tmp_path: Path
) -> None:
    victim = "hf-fp32-b1"  # eight batches of one row
    args = ("--results", str(tmp_path / "two"), "--lanes", "2", "--cluster", cluster.address)
    killed = _reproduce(repo_copy, *args, env={KILL_AT_ENV: f"after-batch:{victim}"})
    assert killed.returncode == 2, killed.stderr
    assert "its process died (Ray: WorkerCrashedError)" in killed.stderr, killed.stderr
    assert "run the same command again to resume" in killed.stderr
    run = _run_dir(tmp_path / "two")
    partial = (run / "generations" / f"{victim}.jsonl").read_text().splitlines()
    assert 0 < len(partial) < 8
    resumed = _reproduce(repo_copy, *args)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming run {run.name}" in resumed.stderr
    after = (run / "generations" / f"{victim}.jsonl").read_text().splitlines()
    assert after[: len(partial)] == partial and len(after) == 8
    sequential = _reproduce(repo_copy, "--results", str(tmp_path / "one"))
    assert sequential.returncode == 0, sequential.stderr
    assert _rows(run) == _rows(_run_dir(tmp_path / "one"))


def _seal_with_hardware(repo: Path, kind: str) -> str:
    """smoke-v2 as a new plan whose fp32 transformers arms (HARDWARE_ARMS: the two arms of one batch
    control, which may differ only in batch size) ask for the hardware kind `kind`, sealed in the
    copy's ledger; its directory."""
    directory = repo / "prereg" / f"smoke-{kind}"
    shutil.copytree(repo / SMOKE, directory)
    text = (directory / "plan.toml").read_text(encoding="utf-8")
    text = text.replace('name = "smoke"', f'name = "smoke-{kind}"', 1)
    text = re.sub(r'^(amends|amend_reason) = .*\n', "", text, flags=re.M)  # a new plan, not an amendment
    for arm in HARDWARE_ARMS:
        text = text.replace(f'name = "{arm}"\n', f'name = "{arm}"\nhardware = "{kind}"\n', 1)
    (directory / "plan.toml").write_text(text, encoding="utf-8")
    relative = str(directory.relative_to(repo))
    sealed = subprocess.run(
        [sys.executable, "-m", "capsule", "prereg", "seal", relative, "--note", "test"],
        cwd=repo, capture_output=True, text=True, timeout=60,
    )
    assert sealed.returncode == 0, sealed.stderr
    return relative


def test_an_arm_asking_for_a_hardware_kind_runs_on_a_node_of_that_kind(
    cluster: Any, repo_copy: Path, tmp_path: Path
) -> None:
    (worker,) = cluster.worker_nodes  # the node with "hw-b"
    plan = _seal_with_hardware(repo_copy, "hw-b")
    laned = _reproduce(repo_copy, "--plan", plan, "--results", str(tmp_path), "--lanes", "2",
                       "--cluster", cluster.address)
    assert laned.returncode == 0, laned.stderr
    assert " [hw-b]: " in laned.stderr, laned.stderr
    (run,) = (tmp_path / "smoke-hw-b").iterdir()
    for arm in HARDWARE_ARMS:
        meta = json.loads((run / "generations" / f"{arm}.meta.json").read_text())
        assert {segment["node"] for segment in meta["segments"]} == {worker.node_id}
        assert meta["arm"]["hardware"] == "hw-b"
    absent = _seal_with_hardware(repo_copy, "hw-c")
    refused = _reproduce(repo_copy, "--plan", absent, "--results", str(tmp_path), "--lanes", "2",
                         "--cluster", cluster.address)
    assert refused.returncode == 2, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "no node of the Ray cluster has hw-c" in errors[0], refused.stderr
    assert not list((tmp_path / "smoke-hw-c").glob("*/generations/*.jsonl"))  # before any arm
