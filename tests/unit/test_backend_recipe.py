"""The recipe in capsule/README.md for a new backend, followed (issue 39 item 2): a toy backend
declared as it says, with the traits of a vLLM engine behind another API, gets engine sharing, lanes,
cost and memory exactly as the vLLM arm it copies, and the transformers-like toy exactly as hf; no
list of backend names elsewhere needs to learn its name."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from capsule.costing.devices import arm_throughput, device_table
from capsule.errors import BadInputError
from capsule.machine.memory import GIB, HostFacts, ModelFacts, arm_need
from capsule.pipeline.lanes import LaneOptions, check_lanes
from capsule.prereg import backend_specs
from capsule.prereg.engine_sharing import reuse_key, splittable
from capsule.prereg.loader import load_plan

REPO = Path(__file__).resolve().parents[2]
H200 = HostFacts(gpus=(("NVIDIA H200", 141 * GIB),), gpu_reason=None, torch_version="2.14.0",
                 torch_cuda="13.0", vllm="vllm 0.33.0", transformers="transformers 5.19.0",
                 ram_available_bytes=200 * GIB, free_disk_bytes=500 * GIB)
MODEL = ModelFacts(None, 4_000_000_000, "model name", 65_536, 0)


@pytest.fixture
def toys(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Two toy backends registered as the recipe says (one entry in SPECS each), copying the traits
    of vLLM and of hf under another class and name."""
    specs = dict(backend_specs.SPECS)
    specs["toy-engine"] = dataclasses.replace(specs["vllm"], target="toy:Engine")
    specs["toy-static"] = dataclasses.replace(specs["hf"], target="toy:Static")
    monkeypatch.setattr(backend_specs, "SPECS", specs)
    for module in ("capsule.prereg.engine_sharing", "capsule.pipeline.lanes", "capsule.machine.memory",
                   "capsule.costing.devices"):
        monkeypatch.setattr(f"{module}.SPECS", specs)
    return {"toy-engine": "vllm", "toy-static": "hf"}


def test_a_toy_backend_gets_the_traits_it_declares(toys: dict[str, str]) -> None:
    plan = load_plan(REPO / "prereg" / "agents-a1-4b-v3")
    table = device_table()
    h200 = table.device("h200")
    for toy, like in toys.items():
        original = next(arm for arm in plan.arms if arm.backend == like and not arm.env)
        arm = dataclasses.replace(original, backend=toy)
        # engine sharing: the same load-time key but for the name, the same splitting into shares
        assert reuse_key(arm)[1:] == reuse_key(original)[1:] and splittable(arm) == splittable(original)
        # memory: the same device, KV and budget on an H200
        need, expected = arm_need(arm, MODEL, H200), arm_need(original, MODEL, H200)
        assert dataclasses.replace(need, backend=like) == expected, toy
        # cost: priced by the step times of the backend it copies
        assert arm_throughput(table, h200, arm) == arm_throughput(table, h200, original), toy


def test_a_toy_vllm_engine_needs_a_fixed_kv_cache_to_share_a_gpu(toys: dict[str, str]) -> None:
    plan = load_plan(REPO / "prereg" / "agents-a1-4b-v3")
    vllm = next(arm for arm in plan.arms if arm.backend == "vllm")
    options = {k: v for k, v in vllm.backend_options.items() if k != "kv_cache_memory_bytes"}
    engines = tuple(
        dataclasses.replace(vllm, name=f"toy-{n}", backend="toy-engine", backend_options=options,
                            batch_size=n)
        for n in (8, 16)
    )
    with pytest.raises(BadInputError, match="arm\\(s\\) toy-8, toy-16 have no fixed kv_cache_memory_bytes"):
        check_lanes(dataclasses.replace(plan, arms=engines), LaneOptions(2), gpu_count=1)
    fixed = tuple(
        dataclasses.replace(arm, backend_options={**options, "kv_cache_memory_bytes": GIB}) for arm in engines
    )
    check_lanes(dataclasses.replace(plan, arms=fixed), LaneOptions(2), gpu_count=1)
