"""`capsule reproduce --lanes N [--gpus ...]`: lane placement, bad input refused before anything is
written, a dry run on two lanes equal to the sequential one row for row, and a lane killed mid-arm
resumed by the same command with no other arm touched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from capsule.cli import cli
from capsule.costing.sizing import place_longest_first
from capsule.faults import KILL_AT_ENV
from capsule.pipeline import lane_pricing
from capsule.pipeline import lanes as lanes_module
from capsule.pipeline.lanes import LaneOptions, assign_lanes, parse_gpus
from capsule.prereg.engine_sharing import engine_runs, lane_units
from capsule.prereg.loader import load_plan

SMOKE = "prereg/smoke-v2"
TIMING = ("elapsed_s",)  # the one row field that is a measurement, not a generation


def _run(*args: str) -> Any:
    return CliRunner().invoke(cli, ["reproduce", "--no-progress", "--plan", SMOKE, "--dry-run", *args])


def _one_gpu(monkeypatch: pytest.MonkeyPatch, count: int = 1) -> None:
    gpus = [{"index": i, "name": "NVIDIA H200", "memory_total_bytes": 141 << 30} for i in range(count)]
    monkeypatch.setattr(lanes_module, "probe_gpus", lambda: {"gpus": gpus, "gpu_system": {}})


def _rows(run: Path) -> dict[str, list[dict[str, Any]]]:
    """Every arm's rows, without their timings."""
    rows = {}
    for path in sorted((run / "generations").glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        rows[path.stem] = [{k: v for k, v in row.items() if k not in TIMING} for row in lines]
    return rows


def _only_run(root: Path) -> Path:
    (run,) = (root / "runs" / "dry-run" / "smoke").iterdir()
    return run


def test_runs_are_placed_longest_first_on_the_least_loaded_lane() -> None:
    weights = [5.0, 1.0, 4.0, 2.0]
    placed = place_longest_first(weights, 2)
    assert sorted(i for lane in placed for i in lane) == list(range(len(weights)))
    assert placed[0][0] == weights.index(max(weights))  # the longest goes first, on lane 1
    loads = [sum(weights[i] for i in lane) for lane in placed]
    assert max(loads) - min(loads) <= min(weights)  # no move of one item could even the lanes more
    assert all(lane == sorted(lane) for lane in placed)  # each lane in plan order
    assert place_longest_first(weights, 1) == [list(range(len(weights)))]


def test_arms_sharing_an_engine_stay_in_one_lane_in_plan_order(repo_root: Path) -> None:
    """vLLM and server engine runs stay whole in one lane; transformers runs are split into their
    arms (each loads its own model), and at least one such run is split here."""
    plan = load_plan(repo_root / SMOKE)
    runs = engine_runs(plan.arms)
    assert any(run[0].backend == "hf" and len(run) > 1 for run in runs)
    by_size = lambda _p, r, _g: [float(len(x)) for x in r]  # noqa: E731
    lanes = assign_lanes(plan, LaneOptions(3), weights=by_size, gpu_names=[])
    order = [arm.name for arm in plan.arms]
    assert sorted(a for lane in lanes for a in lane.arms) == sorted(order)
    for lane in lanes:
        assert list(lane.arms) == sorted(lane.arms, key=order.index)
        assert lane.device == "cpu" and lane.environment == {}
    lane_of = {a: lane.number for lane in lanes for a in lane.arms}
    for run in runs:
        if run[0].backend != "hf":
            assert len({lane_of[arm.name] for arm in run}) == 1
    assert lane_units(plan.arms) == [
        unit for run in runs for unit in ([[arm] for arm in run] if run[0].backend == "hf" else [run])
    ]


def test_a_rehearsal_prices_each_engine_run_as_its_start_so_the_vllm_engines_share_the_lanes(
    repo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rehearsal's arms are a few tokens each, so its lanes are balanced by engine starts: priced as
    the GPU plan's arms, the v3 rehearsal's transformers arms filled one lane and 9 of its 14 vLLM
    and server engine runs the other (measured: 3 min 28 s with 2 lanes, against 234 s for one)."""
    from types import SimpleNamespace

    from capsule.pipeline.lane_pricing import start_weights

    plan = load_plan(repo_root / "prereg" / "agents-a1-4b-v3")
    units = lane_units(plan.arms)
    table = {"hf": 6.0, "vllm": 28.0, "server": 39.0}  # the 2-core Xeon's measured starts
    monkeypatch.setattr(lane_pricing, "match_host", lambda _t, _g: SimpleNamespace(start_s=table))
    assert start_weights(plan, units, []) == [table[unit[0].backend] for unit in units]
    lanes = assign_lanes(plan, LaneOptions(2), weights=start_weights, gpu_names=[])
    engines = {arm.name for arm in plan.arms if arm.backend != "hf"}
    per_lane = [sum(1 for unit in units if unit[0].name in lane.arms and unit[0].name in engines)
                for lane in lanes]
    assert len(per_lane) == 2 and abs(per_lane[0] - per_lane[1]) <= 1, per_lane
    monkeypatch.setattr(lane_pricing, "match_host", lambda _t, _g: None)  # a host the table lacks
    assert start_weights(plan, units, []) == [1.0] * len(units)


def test_reproduce_places_the_gpu_plan_as_plan_cost_arranges_its_split_loads(repo_root: Path) -> None:
    """`reproduce --lanes` and `plan cost --lanes` price the same units the same way (each unit's
    own start included), so on an H200 the lanes the study runs are the lanes its cost printed."""
    from capsule.costing.devices import device_table
    from capsule.costing.lane_plan import arrange
    from capsule.costing.pricing import match_host
    from capsule.costing.response_lengths import length_models
    from capsule.costing.sizing import estimate_plan

    plan = load_plan(repo_root / "prereg" / "agents-a1-4b-v3")
    device = match_host(device_table(), ["NVIDIA H200"])
    assert device is not None
    estimate = estimate_plan(plan, device_table(), device, length_models())
    assert estimate.units == tuple(tuple(arm.name for arm in unit) for unit in lane_units(plan.arms))
    shared = 0
    for count in (2, 3, 6, 8):  # at 6 and 8 the longest transformers arms are cut into batch shares
        printed = arrange(estimate, count, split_loads=True)
        lanes = assign_lanes(plan, LaneOptions(count), gpu_names=["NVIDIA H200"])
        assert sorted(lane.describe() for lane in lanes) == sorted(lane.describe() for lane in printed.lanes)
        shared += sum(len(lane.shards) for lane in lanes)
    assert shared > 0


def test_gpus_give_each_lane_its_own_device(repo_root: Path) -> None:
    plan = load_plan(repo_root / SMOKE)
    even = lambda _p, r, _g: [1.0] * len(r)  # noqa: E731
    lanes = assign_lanes(plan, LaneOptions(2, (1, 0)), weights=even, gpu_names=["H200"])
    assert [lane.device for lane in lanes] == ["cuda:1", "cuda:0"]
    assert lanes[0].environment == {"CUDA_VISIBLE_DEVICES": "1"}


@pytest.mark.parametrize("text", ["a", "0,0", "1,-1", ""])
def test_a_malformed_gpu_list_is_bad_input(text: str) -> None:
    with pytest.raises(Exception, match="--gpus"):
        parse_gpus(text)


@pytest.mark.parametrize(
    ("args", "gpus", "said"),
    [
        (["--lanes", "0"], 0, "--lanes 0: at least 1"),
        (["--lanes", "99"], 0, "has at most"),
        (["--lanes", "2", "--gpus", "0"], 0, "no GPU NVML can list"),
        (["--lanes", "2", "--gpus", "0,3"], 2, "no GPU 3 here"),
        (["--lanes", "2"], 1, "kv_cache_memory_bytes"),  # two lanes on one GPU, vLLM arms unfixed
    ],
)
def test_bad_lanes_are_one_error_line_before_anything_is_written(
    repo_copy: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], gpus: int, said: str
) -> None:
    _one_gpu(monkeypatch, gpus)
    result = _run(*args)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and said in errors[0], result.stderr
    assert not (repo_copy / "runs").exists()


@pytest.mark.usefixtures("local_ray")
def test_two_lanes_give_the_sequential_rows_and_record_where_each_arm_ran(
    repo_copy: Path, tmp_path: Path
) -> None:
    sequential = _run("--results", str(tmp_path / "one"))
    assert sequential.exit_code == 0, sequential.stderr
    laned = _run("--lanes", "2")
    assert laned.exit_code == 0, laned.stderr
    run = _only_run(repo_copy)
    (one,) = (tmp_path / "one" / "smoke").iterdir()
    assert _rows(run) == _rows(one)
    lines = [line for line in laned.stderr.splitlines() if line.startswith("lane ") and " on cpu: " in line]
    assert len(lines) == 2
    for meta_path in (run / "generations").glob("*.meta.json"):
        meta = json.loads(meta_path.read_text())
        assert meta["lane"] in (1, 2) and meta["device"] == "cpu"
        assert meta["segments"][-1]["lane"] == meta["lane"]
    for meta_path in (one / "generations").glob("*.meta.json"):
        assert "lane" not in json.loads(meta_path.read_text())  # --lanes 1: the sidecar as before
    assert (run / "bundle.dsse.json").exists()


@pytest.mark.usefixtures("local_ray")
def test_a_lane_killed_mid_arm_resumes_and_no_other_arm_loses_a_row(
    repo_copy: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plan = load_plan(repo_copy / SMOKE)
    lanes = assign_lanes(plan, LaneOptions(2))
    rows_of = {arm.name: 8 // arm.batch_size for arm in plan.arms}
    victim = next(a for a in lanes[-1].arms if rows_of[a] > 1)  # an arm of several batches
    monkeypatch.setenv(KILL_AT_ENV, f"after-batch:{victim}")
    killed = _run("--lanes", "2")
    assert killed.exit_code == 2, killed.stderr
    assert "its process died (Ray: WorkerCrashedError)" in killed.stderr, killed.stderr
    assert "run the same command again to resume" in killed.stderr
    run = _only_run(repo_copy)
    partial = (run / "generations" / f"{victim}.jsonl").read_text().splitlines()
    assert 0 < len(partial) < 8
    others = {p.name: p.read_bytes() for p in (run / "generations").glob("*.jsonl") if p.stem != victim}
    assert {n.removesuffix(".jsonl") for n in others} >= set(lanes[0].arms)  # the other lane finished
    monkeypatch.delenv(KILL_AT_ENV)
    resumed = _run("--lanes", "2")
    assert resumed.exit_code == 0, resumed.stderr
    assert f"resuming run {run.name}" in resumed.stderr
    for name, data in others.items():
        assert (run / "generations" / name).read_bytes()[: len(data)] == data  # nothing lost or rewritten
    after = (run / "generations" / f"{victim}.jsonl").read_text().splitlines()
    assert after[: len(partial)] == partial and len(after) == 8
    sequential = _run("--results", str(tmp_path / "one"))
    assert sequential.exit_code == 0
    (one,) = (tmp_path / "one" / "smoke").iterdir()
    by_key = {arm: sorted(rows, key=lambda r: r["key"]) for arm, rows in _rows(run).items()}
    assert by_key == {arm: sorted(rows, key=lambda r: r["key"]) for arm, rows in _rows(one).items()}
    meta = json.loads((run / "generations" / f"{victim}.meta.json").read_text())
    assert meta["status"] == "complete" and len(meta["segments"]) == 2
