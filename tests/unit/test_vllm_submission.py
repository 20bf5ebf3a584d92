"""The vLLM backend queues every request of an arm before the engine schedules any (vLLM's own
recipe: `LLM.sleep(level=0)`, `LLM.enqueue`, `LLM.wake_up(tags=["scheduling"])`), so an arm's first
batches never depend on how fast its requests reached the engine process. Checked on a recording
stand-in for `vllm.LLM` (the real engine runs it in the integration tier: every vLLM arm)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from capsule.generation.backends import Request
from capsule.generation.backends.vllm import VLLMBackend
from capsule.prereg.plan import Decoding

GREEDY = Decoding("greedy", 0.0, 1.0, 0, 0.0, 0.0, 1.0)


class _RecordingLLM:
    """Records the calls the backend makes, in order; steps finish every request at once."""

    def __init__(self, fail_enqueue: bool = False) -> None:
        self.calls: list[Any] = []
        self.fail_enqueue = fail_enqueue
        self.queued: list[str] = []
        self.llm_engine = SimpleNamespace(
            has_unfinished_requests=lambda: bool(self.queued), step=self._step, abort_request=self._abort
        )

    def sleep(self, level: int = 1, mode: str = "abort") -> None:
        self.calls.append(("sleep", level))

    def wake_up(self, tags: list[str] | None = None) -> bool:
        self.calls.append(("wake_up", tags))
        return True

    def enqueue(self, prompts: list[Any], params: list[Any], use_tqdm: bool = True) -> list[str]:
        self.calls.append(("enqueue", len(prompts)))
        if self.fail_enqueue:
            raise RuntimeError("engine refused a request")
        self.queued = [str(i) for i in range(len(prompts))]
        return list(self.queued)

    def _step(self) -> list[Any]:
        self.calls.append("step")
        done = [SimpleNamespace(finished=True, request_id=rid,
                                outputs=[SimpleNamespace(token_ids=[1, 2], finish_reason="stop")])
                for rid in self.queued]
        self.queued = []
        return done

    def _abort(self, ids: list[str]) -> None:
        self.calls.append(("abort", ids))


def _backend(llm: _RecordingLLM) -> VLLMBackend:
    backend = VLLMBackend.__new__(VLLMBackend)  # the engine itself is the stand-in: no model loads
    backend.llm = llm
    backend.stop_ids = [0]
    return backend


def test_every_request_is_queued_with_scheduling_paused_before_the_first_step() -> None:
    pytest.importorskip("vllm")  # SamplingParams
    llm = _RecordingLLM()
    requests = [Request(k, (1, 2, 3)) for k in range(5)]
    completions = _backend(llm).generate(requests, GREEDY, 8, [0] * 5)
    assert len(completions) == 5
    assert llm.calls[:3] == [("sleep", 0), ("enqueue", 5), ("wake_up", ["scheduling"])]
    assert llm.calls[3] == "step"


def test_scheduling_resumes_even_when_queueing_fails() -> None:
    pytest.importorskip("vllm")
    llm = _RecordingLLM(fail_enqueue=True)
    with pytest.raises(RuntimeError, match="engine refused"):
        _backend(llm).generate([Request(0, (1,))], GREEDY, 8, [0])
    assert llm.calls == [("sleep", 0), ("enqueue", 1), ("wake_up", ["scheduling"])]
