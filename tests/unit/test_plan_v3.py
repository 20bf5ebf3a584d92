"""prereg/smollm2-135m-v3: the claim arm kept from v2, bf16 batch-size contrasts beside their fp32
twins under both backends (64 paired prompts each), arms ordered for four vLLM engine starts."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from capsule.generation.backends import reuse_key
from capsule.prereg.loader import load_plan

REPO = Path(__file__).resolve().parents[2]


def test_the_claim_arm_and_verdict_rule_are_v2s() -> None:
    v2, v3 = load_plan(REPO / "prereg" / "smollm2-135m-v2"), load_plan(REPO / "prereg" / "smollm2-135m-v3")
    assert dataclasses.replace(v3.arm("primary"), description="") == dataclasses.replace(
        v2.arm("primary"), description=""
    )
    assert v3.verdict == v2.verdict and v3.claim == v2.claim and v3.model == v2.model
    assert v3.name == v2.name  # runs still land in results/smollm2-135m/


def test_batch_contrasts_cover_both_dtypes_and_backends_with_64_pairs() -> None:
    plan = load_plan(REPO / "prereg" / "smollm2-135m-v3")
    cells = set()
    for control in plan.controls:
        if control.kind != "batch_size":
            continue
        arms = [plan.arm(name) for name in control.arms]
        assert len({(a.dtype, a.backend, a.subset, a.max_new_tokens) for a in arms}) == 1
        assert plan.prompts.subsets[arms[0].subset].n == 64
        cells.add((arms[0].dtype, arms[0].backend))
    assert cells == {(d, b) for d in ("bfloat16", "float32") for b in ("hf", "vllm")}


def test_vllm_arms_need_four_engine_starts() -> None:
    plan = load_plan(REPO / "prereg" / "smollm2-135m-v3")
    keys = [reuse_key(arm) for arm in plan.arms if arm.backend == "vllm"]
    starts = 1 + sum(a != b for a, b in zip(keys, keys[1:], strict=False))
    assert starts == len(set(keys)) == 4  # consecutive arms with equal load-time settings share one
