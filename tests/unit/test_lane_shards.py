"""Batch shares: a long transformers arm cut into shares of its batches that run on lanes of their
own (`capsule.prereg.engine_sharing.split_units`, placed by `capsule.pipeline.lanes.assign_lanes`).
The shares' rows are the arm's rows run whole; each segment of the sidecar names the lane, device,
share and batches it wrote; a share killed mid-arm loses nothing and resumes on any lane count."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from capsule.faults import KILL_AT_ENV
from capsule.pipeline import lane_pricing
from capsule.pipeline.lane_pricing import start_weights
from capsule.pipeline.lane_runner import LaneFailedError
from capsule.pipeline.lanes import LaneOptions, assign_lanes, check_lanes
from capsule.pipeline.opening import OpenRun
from capsule.pipeline.run_start import RunStart
from capsule.pipeline.stage_generate import GenerateInputs, generate_all
from capsule.prereg.engine_sharing import LaneUnit, Shard, split_units
from capsule.prereg.loader import load_plan
from capsule.prereg.plan import Plan
from capsule.run_dir import RunDir
from ifeval_scorer import load_prompts

SMOKE = "prereg/smoke-v2"
LONG = "hf-fp32-b1"  # 8 prompts at batch 1: 8 batches, the plan's longest transformers arm here
TIMING = ("elapsed_s",)


@pytest.fixture(autouse=True)
def _by_token_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Price lane units by token budget on every machine (the device table knows some CPUs, and
    would price these arms by its step times there)."""
    monkeypatch.setattr(lane_pricing, "match_host", lambda _table, _gpus: None)


def _plan(repo_root: Path, *names: str) -> Plan:
    plan = load_plan(repo_root / SMOKE)
    return dataclasses.replace(plan, arms=tuple(a for a in plan.arms if a.name in names))


def _generate(plan: Plan, path: Path, lanes: int, prompts_path: Path) -> list[str]:
    said: list[str] = []
    record = RunStart(run_id=path.name, plan_path=SMOKE, plan_sha256="0" * 64, ledger_head_at_start="none",
                      started="", capsule_version="")
    run = OpenRun(RunDir(path), record, resumed=False)
    inputs = GenerateInputs(load_prompts(prompts_path), None, "shards-test", "")
    generate_all(plan, run, inputs, dry_run=True, progress=False, say=said.append, lanes=LaneOptions(lanes))
    return said


def _rows(path: Path, arm: str) -> list[dict[str, Any]]:
    lines = (path / "generations" / f"{arm}.jsonl").read_text().splitlines()
    rows = [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]
    return sorted(rows, key=lambda row: row["key"])


def test_a_shard_takes_its_positions_and_shards_join() -> None:
    shard = Shard((1,), 3)
    assert [p for p in range(8) if shard.takes(p)] == [1, 4, 7] and shard.batches(8) == 3
    joined = shard.joined(Shard((0,), 3))
    assert joined.indices == (0, 1) and joined.batches(8) == 6 and joined.label() == "batch share 1,2/3"
    taken = [p for p in range(8) for index in range(3) if Shard((index,), 3).takes(p)]
    assert sorted(taken) == list(range(8))  # every batch in exactly one share


def test_only_a_long_transformers_arm_is_split_each_share_paying_its_start(repo_root: Path) -> None:
    plan = _plan(repo_root, LONG, "vllm-bf16-b4", "hf-bf16-b4")
    arm = {a.name: a for a in plan.arms}
    units = [LaneUnit((arm[name],)) for name in (LONG, "vllm-bf16-b4", "hf-bf16-b4")]
    weights, starts, batches = [90.0, 10.0, 5.0], [2.0, 2.0, 2.0], [8, 2, 2]
    split, priced = split_units(units, weights, starts, batches, 3)
    long_shares = [u.shard for u in split if u.names == (LONG,)]
    assert len(long_shares) == 3 and all(s is not None and s.count == 3 for s in long_shares)  # ceil(90/35)
    assert [u for u in split if u.names != (LONG,)] == units[1:]  # short arms stay whole
    assert sum(priced[: 3]) == pytest.approx(88.0 + 3 * 2.0)  # the generation once, a start per share
    assert split_units(units, weights, starts, batches, 1)[0] == units  # one lane splits nothing
    vllm_only = [LaneUnit((arm["vllm-bf16-b4"],))]
    assert split_units(vllm_only, [90.0], [2.0], [8], 4)[0] == vllm_only  # an engine run is never split
    capped = [LaneUnit((dataclasses.replace(arm[LONG], max_wall_minutes=5.0),))]
    assert split_units(capped, [90.0], [2.0], [8], 4)[0] == capped  # a wall-clock cap counts one arm's time


def test_two_lanes_share_the_longest_arm_and_a_rehearsal_splits_nothing(repo_root: Path) -> None:
    plan = _plan(repo_root, LONG, "hf-bf16-b4")
    lanes = assign_lanes(plan, LaneOptions(2), gpu_names=[])  # by token budget: 384 against 384
    assert sorted(lane.arms for lane in lanes) == [("hf-bf16-b4",), (LONG,)]  # none over a lane's share
    assert all(not lane.shards for lane in lanes)
    lanes = assign_lanes(plan, LaneOptions(3), gpu_names=[])
    shares = [lane.shard_of(LONG) for lane in lanes if LONG in lane.arms]
    assert len(shares) == 2 and {s.indices for s in shares if s} == {(0,), (1,)}
    assert any("(batch share 1/2)" in lane.describe() for lane in lanes)
    rehearsed = assign_lanes(plan, LaneOptions(2), weights=start_weights, gpu_names=[], split=False)
    assert all(not lane.shards for lane in rehearsed)


def test_more_lanes_than_arms_are_allowed_up_to_the_batches_they_can_share(repo_root: Path) -> None:
    plan = _plan(repo_root, LONG, "vllm-bf16-b4")
    check_lanes(plan, LaneOptions(9), gpu_count=0)  # 8 batches of LONG + one vLLM engine run
    with pytest.raises(Exception, match="--lanes 10: plan smoke has at most 9 units"):
        check_lanes(plan, LaneOptions(10), gpu_count=0)


@pytest.mark.usefixtures("local_ray")
def test_shared_arm_rows_equal_the_sequential_rows_and_each_segment_names_its_batches(
    repo_root: Path, tmp_path: Path, prompts_path: Path
) -> None:
    plan = _plan(repo_root, LONG, "vllm-bf16-b4")
    _generate(plan, tmp_path / "one", 1, prompts_path)
    said = _generate(plan, tmp_path / "three", 3, prompts_path)
    assert _rows(tmp_path / "three", LONG) == _rows(tmp_path / "one", LONG)
    assert _rows(tmp_path / "three", "vllm-bf16-b4") == _rows(tmp_path / "one", "vllm-bf16-b4")
    assert any(f"{LONG} (batch share 1/" in line for line in said), said
    meta = json.loads((tmp_path / "three" / "generations" / f"{LONG}.meta.json").read_text())
    assert meta["status"] == "complete" and meta["n_rows"] == 8 and meta["reason"] == ""
    written = [b for segment in meta["segments"] for b in segment["batches"]]
    assert sorted(written) == list(range(8))  # every batch once, by the lane that wrote it
    assert len({segment["lane"] for segment in meta["segments"]}) == len(meta["segments"]) >= 2
    assert all(segment["batch_share"]["of"] == len(meta["segments"]) for segment in meta["segments"])


@pytest.mark.usefixtures("local_ray")
def test_a_share_killed_mid_arm_loses_nothing_and_resumes_on_one_lane(
    repo_root: Path, tmp_path: Path, prompts_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan(repo_root, LONG, "vllm-bf16-b4")
    run = tmp_path / "killed"
    monkeypatch.setenv(KILL_AT_ENV, f"after-batch:{LONG}")  # each share's process dies after its first batch
    with pytest.raises(LaneFailedError, match="run the same command again to resume"):
        _generate(plan, run, 3, prompts_path)
    partial = (run / "generations" / f"{LONG}.jsonl").read_text().splitlines()
    assert 0 < len(partial) < 8
    monkeypatch.delenv(KILL_AT_ENV)
    _generate(plan, run, 1, prompts_path)  # resumed sequentially: only the missing batches run
    after = (run / "generations" / f"{LONG}.jsonl").read_text().splitlines()
    assert after[: len(partial)] == partial and len(after) == 8
    _generate(plan, tmp_path / "one", 1, prompts_path)
    assert _rows(run, LONG) == _rows(tmp_path / "one", LONG)
    meta = json.loads((run / "generations" / f"{LONG}.meta.json").read_text())
    assert meta["status"] == "complete"
