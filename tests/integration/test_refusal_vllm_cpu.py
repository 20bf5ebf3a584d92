"""A real vLLM-CPU engine whose worker process fails at start-up: its own error line reaches the
caller through the start-up log, where declared refusals are looked for (docs/refused-arms.md).
The capsule's own refusal of VLLM_BATCH_INVARIANT=1 on vLLM-CPU is tested in tests/unit/test_backends.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from capsule.artifacts.embedded_model import model_cache_dir
from capsule.generation.backends import load_backend
from capsule.generation.refusals import BackendRefusedError, refusal_of, startup_log_of
from capsule.prereg.loader import load_plan

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


def test_a_start_up_failure_in_the_engine_process_reaches_the_caller_in_its_log() -> None:
    """vLLM-CPU refuses to start when gpu_memory_utilization asks for more RAM than is free: the
    error is raised in its worker process, and the caller sees only "initialization failed". The
    start-up log (`StderrTee`) carries the worker's own line; not a declared refusal, so a failure."""
    model = model_cache_dir()
    if not model.is_dir():
        pytest.skip("the embedded model is not in the cache (capsule fetch model)")
    plan = load_plan(REPO / "prereg" / "smoke-v2")
    vllm_arm = next(arm for arm in plan.arms if arm.backend == "vllm")
    greedy = dataclasses.replace(
        vllm_arm, backend_options={**vllm_arm.backend_options, "gpu_memory_utilization": 1.0}
    )
    with pytest.raises(Exception) as failed:
        load_backend("vllm", model, greedy, plan.model.loader)
    assert not isinstance(failed.value, BackendRefusedError)
    log = startup_log_of(failed.value)
    assert "ValueError: Available memory on node" in log, log[-2000:]
    assert refusal_of("vllm", failed.value) is None
