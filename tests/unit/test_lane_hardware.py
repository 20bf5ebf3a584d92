"""Arms that ask for a hardware kind (`hardware = "<Ray resource>"`): parsed and left out of an arm's
record at its default (so the identities of runs made before it stand), never sharing an engine
with an arm of another kind, placed one kind per lane with a lane kept for every kind, asked of Ray
as a share of that resource, and refused without `--cluster` in a recorded run."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from capsule.costing.sizing import place_longest_first
from capsule.errors import BadInputError
from capsule.generation.arm_identity import arm_dict
from capsule.pipeline.lane_runner import HARDWARE_SHARE, lane_resources
from capsule.pipeline.lanes import Lane, LaneOptions, assign_lanes, check_hardware, check_lanes
from capsule.prereg.adhoc import check_arm
from capsule.prereg.checks import check_devices
from capsule.prereg.engine_sharing import reuse_key
from capsule.prereg.loader import load_plan
from capsule.prereg.plan import Arm, Control, Plan

SMOKE = "prereg/smoke-v2"


def _plan_with(repo_root: Path, asks: dict[str, str]) -> Plan:
    plan = load_plan(repo_root / SMOKE)
    arms = tuple(dataclasses.replace(arm, hardware=asks.get(arm.name, "")) for arm in plan.arms)
    return dataclasses.replace(plan, arms=arms)


def test_a_hardware_kind_is_part_of_the_arm_only_when_asked_for(repo_root: Path) -> None:
    arm = load_plan(repo_root / SMOKE).arms[0]
    assert "hardware" not in arm_dict(arm)  # a run made before the field keeps its identity
    asked = dataclasses.replace(arm, hardware="accelerator_type:H100")
    assert arm_dict(asked)["hardware"] == "accelerator_type:H100"
    assert reuse_key(asked) != reuse_key(arm)  # never one engine for two kinds of node
    check_arm(asked)
    with pytest.raises(BadInputError, match="not a Ray resource name"):
        check_arm(dataclasses.replace(arm, hardware="two words"))


def test_without_kinds_placement_is_as_before() -> None:
    rng = random.Random(3)
    for _ in range(50):
        weights = [rng.choice([1.0, 2.0, 3.5, 7.0]) for _ in range(rng.randint(1, 9))]
        lanes = rng.randint(1, 4)
        assert place_longest_first(weights, lanes, [""] * len(weights)) == place_longest_first(weights, lanes)


def test_each_kind_gets_a_lane_of_its_own_even_when_another_kind_is_longer() -> None:
    # unconstrained, the second "a" unit would take the empty lane 2 and leave "b" none
    assert place_longest_first([5.0, 4.0, 1.0], 2, ["a", "a", "b"]) == [[0, 1], [2]]
    assert place_longest_first([5.0, 4.0, 3.0, 1.0], 3, ["a", "", "b", "a"]) == [[0], [1, 3], [2]]
    with pytest.raises(BadInputError, match="ask for 2 hardware kinds"):
        place_longest_first([1.0, 1.0], 1, ["a", "b"])


def test_a_lane_asks_ray_for_its_kind_and_a_cluster_gpu(repo_root: Path) -> None:
    plan = _plan_with(repo_root, {"hf-fp32-b1": "hw-b"})
    lanes = assign_lanes(plan, LaneOptions(2, cluster="127.0.0.1:6379"), weights=_by_size, gpu_names=[])
    (kinded,) = [lane for lane in lanes if lane.hardware]
    assert kinded.hardware == "hw-b" and "hf-fp32-b1" in kinded.arms
    assert lane_resources(kinded, "127.0.0.1:6379", 0.0) == {"CPU": 1.0, "hw-b": HARDWARE_SHARE}
    assert lane_resources(Lane(1, "cpu", ("x",)), "127.0.0.1:6379", 8.0) == {"CPU": 1.0, "GPU": 1.0}
    assert lane_resources(Lane(1, "cpu", ("x",)), None, 0.0) == {"CPU": 1.0}


def _by_size(_plan: Plan, runs: list[list[Arm]], _gpus: list[str]) -> list[float]:
    return [float(len(run)) for run in runs]


def test_a_recorded_run_asking_for_hardware_needs_a_cluster(repo_root: Path) -> None:
    plan = _plan_with(repo_root, {"hf-fp32-b1": "hw-b"})
    with pytest.raises(BadInputError, match="only lanes on a Ray cluster place"):
        check_hardware(plan, LaneOptions(), recorded=True)
    check_hardware(plan, LaneOptions(), recorded=False)  # a dry run, rehearsal or probe runs it here
    check_hardware(plan, LaneOptions(2, cluster="127.0.0.1:6379"), recorded=True)
    two_kinds = _plan_with(repo_root, {"hf-fp32-b1": "hw-b", "hf-fp32-b4": "hw-a"})
    with pytest.raises(BadInputError, match="ask for 2 hardware kinds"):
        check_lanes(two_kinds, LaneOptions(1), gpu_count=0)


def test_a_cross_device_control_may_compare_one_arm_on_two_hardware_kinds(repo_root: Path) -> None:
    plan = load_plan(repo_root / SMOKE)
    arm = next(a for a in plan.arms if a.backend == "vllm")  # any backend, on two kinds of node
    control = Control("cross", "cross_device", (arm.name, arm.name + "-b"))
    h100 = dataclasses.replace(arm, hardware="accelerator_type:H100")
    h200 = dataclasses.replace(arm, name=arm.name + "-b", hardware="accelerator_type:H200")
    check_devices(plan, "plan.toml", control, [h100, h200])
    with pytest.raises(BadInputError, match="must each name theirs"):
        check_devices(plan, "plan.toml", control, [arm, h200])
    changed = dataclasses.replace(h200, backend_options={**h200.backend_options, "enforce_eager": False})
    with pytest.raises(BadInputError, match="need the same backend_options"):
        check_devices(plan, "plan.toml", control, [h100, changed])
    with pytest.raises(BadInputError, match="must use the hf backend"):  # one host: hf's device only
        check_devices(plan, "plan.toml", control, [arm, dataclasses.replace(arm, name="x")])
