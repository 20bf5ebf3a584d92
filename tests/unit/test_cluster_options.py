"""`reproduce --cluster`: bad addresses, and options that do not go with a cluster, are one error line
(exit 2) before anything is written; what a lane takes from its parent's environment; a Ray
started here listens on loopback only."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from capsule.cli import cli
from capsule.cluster.ray_runtime import LOOPBACK, parse_address
from capsule.errors import BadInputError
from capsule.pipeline.lane_runner import lane_env

SMOKE = "prereg/smoke-v2"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])  # nothing listens once the socket is closed


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--lanes", "2", "--cluster", "nowhere"], "not HOST:PORT"),
        (["--lanes", "2", "--cluster", "127.0.0.1:99999"], "not HOST:PORT"),
        (["--lanes", "2", "--cluster", f"127.0.0.1:{_closed_port()}"], "nothing answers there"),
        (["--lanes", "1", "--cluster", "127.0.0.1:6379"], "give --lanes 2 or more"),
        (["--lanes", "2", "--gpus", "0", "--cluster", "127.0.0.1:6379"], "leave out --gpus"),
    ],
)
def test_a_bad_cluster_is_one_error_line_before_anything_is_written(
    repo_copy: Path, args: list[str], said: str
) -> None:
    result = CliRunner().invoke(cli, ["reproduce", "--no-progress", "--plan", SMOKE, "--dry-run", *args])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and said in errors[0], result.stderr
    assert not (repo_copy / "runs").exists()


def test_an_address_is_host_and_port() -> None:
    assert parse_address("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert parse_address("[::1]:6379") == ("::1", 6379)
    with pytest.raises(BadInputError, match="not HOST:PORT"):
        parse_address(":6379")


def test_a_lane_takes_the_numerics_and_capsule_variables_as_the_parent_has_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAPSULE_KILL_AT", "after-batch:x")
    monkeypatch.setenv("MY_KEY", "secret")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = lane_env(("MY_KEY",))
    assert env["CAPSULE_KILL_AT"] == "after-batch:x" and env["MY_KEY"] == "secret"
    assert "OMP_NUM_THREADS" in env and env["OMP_NUM_THREADS"] is None  # unset: the lane unsets it too
    assert "PATH" not in env  # a node's own PATH, HOME, ... stay its own


@pytest.mark.usefixtures("local_ray")
def test_the_ray_started_here_listens_on_loopback_only() -> None:
    import ray

    pids = {str(pid) for pid in _ray_pids()}
    assert pids, "no Ray process found"
    listening = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    ours = [line for line in listening.splitlines() if any(f"pid={pid}," in line for pid in pids)]
    assert ours, listening
    loopback = ("127.0.0.1", "[::ffff:127.0.0.1]", "[::1]")
    beyond = [line for line in ours if line.split()[3].rpartition(":")[0] not in loopback]
    assert not beyond, beyond
    assert {node["NodeManagerAddress"] for node in ray.nodes()} == {LOOPBACK}


def _ray_pids() -> list[int]:
    import psutil

    names = ("gcs_server", "raylet", "ray::", "runtime_env", "dashboard")
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        text = " ".join([process.info["name"] or "", *(process.info["cmdline"] or [])])
        if any(name in text for name in names):
            found.append(process.pid)
    return found


def test_a_node_whose_model_or_prompts_differ_is_named_before_any_lane() -> None:
    from capsule.cluster.ray_runtime import Node
    from capsule.machine.manifest import differing_inputs
    from capsule.pipeline.lane_nodes import check_same_inputs

    run = {"model": {"tree_sha256": "a"}, "data": {"prompts": {"sha256": "p"}}, "host": {"cpu": "x"}}
    same = {**run, "host": {"cpu": "y"}}  # another machine, the same inputs
    assert differing_inputs(same, run) == []
    other = {**run, "model": {"tree_sha256": "b"}}
    assert differing_inputs(other, run) == ["model"]
    node = Node("f" * 56, "10.0.0.7", {"CPU": 8.0})
    with pytest.raises(BadInputError, match=r"Ray node 10\.0\.0\.7 \(ffffffffffff\): its model files differ"):
        check_same_inputs(node, other, run)

