"""Hand an arm's remaining batches to a backend in execution order, within the arm's cost caps.

Two shapes, after `Backend.scope`: "batch" (hf) takes one formed batch per call and the caps are
checked between batches; "arm" (vLLM) takes every remaining request at once, and a batch is written
as soon as all its requests have finished. The caps: `max_prompts` counts whole batches in
execution order, as an uncapped run would meet them; `max_wall_minutes` counts every segment of
the arm, and stops after the batch in flight (vLLM: the unfinished requests are aborted; server:
the unsent ones are dropped).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from capsule.generation.backends import Backend, Completion, Request
from capsule.generation.batching import Batch, arm_request_seed
from capsule.prereg.plan import Arm

WriteBatch = Callable[[Batch, list[Completion], list[float]], None]


def within_max_prompts(todo: list[Batch], max_prompts: int, rows_before: int) -> list[Batch]:
    """The batches a `max_prompts` cap lets run (0 = no cap), whole batches in the given order."""
    if not max_prompts:
        return todo
    budget, capped = max_prompts - rows_before, []
    for batch in todo:
        if budget <= 0:
            break
        capped.append(batch)
        budget -= len(batch.keys)
    return capped


class WallClock:
    """The `max_wall_minutes` cap over all of an arm's segments (0 = no cap)."""

    def __init__(self, max_wall_minutes: float, spent_before: float, started: float) -> None:
        self.limit_s = max_wall_minutes * 60
        self.spent_before, self.started = spent_before, started
        self.reason = f"max_wall_minutes={max_wall_minutes}"

    def exceeded(self) -> bool:
        """Whether the arm has used up its wall-clock budget."""
        return bool(self.limit_s) and self.spent_before + time.monotonic() - self.started >= self.limit_s


def dispatch(
    arm: Arm, backend: Backend, todo: list[Batch], inputs: Mapping[int, list[int]], write: WriteBatch,
    wall: WallClock, texts: Mapping[int, str] | None = None,
) -> str:
    """Generate `todo` on `backend` after its scope; return why it stopped early ("" = it did not).
    `texts` (key -> prompt text) reaches backends that render the template themselves (server chat)."""
    if backend.scope == "batch":
        return _run_batches(arm, backend, todo, inputs, write, wall)
    return _WholeArm(arm, todo, write, wall).run(backend, inputs, texts or {})


def _run_batches(
    arm: Arm, backend: Backend, todo: list[Batch], inputs: Mapping[int, list[int]], write: WriteBatch,
    wall: WallClock,
) -> str:
    """hf: one generate call per batch, in execution order; caps checked between batches."""
    for batch in todo:
        if wall.exceeded():
            return wall.reason
        requests = [Request(k, tuple(inputs[k])) for k in batch.keys]
        seeds = [arm_request_seed(arm.seed, k, arm.backend_options) for k in batch.keys]
        start = time.monotonic()
        completions = backend.generate(requests, arm.decoding, arm.max_new_tokens, seeds)
        write(batch, completions, [time.monotonic() - start] * len(completions))
    return ""


class _StopArm(Exception):
    """Raised inside a vLLM completion callback to stop an arm at a cost cap."""


class _WholeArm:
    """vLLM: every remaining request at once; completions are gathered per batch until it is whole."""

    def __init__(self, arm: Arm, todo: list[Batch], write: WriteBatch, wall: WallClock) -> None:
        self.arm, self.write, self.wall = arm, write, wall
        self.order = [(batch, k) for batch in todo for k in batch.keys]
        # batch index -> {key: (completion, seconds since submission)}
        self.waiting: dict[int, dict[int, tuple[Completion, float]]] = {b.index: {} for b in todo}
        self.start = time.monotonic()

    def run(self, backend: Backend, inputs: Mapping[int, list[int]], texts: Mapping[int, str]) -> str:
        """Submit every request in execution order; return the cap that stopped it, or ""."""
        requests = [Request(k, tuple(inputs[k]), texts.get(k, "")) for _, k in self.order]
        seeds = [arm_request_seed(self.arm.seed, k, self.arm.backend_options) for _, k in self.order]
        self.start = time.monotonic()
        try:
            arm = self.arm
            backend.generate(requests, arm.decoding, arm.max_new_tokens, seeds, on_done=self.on_done)
        except _StopArm:
            return self.wall.reason
        return ""

    def on_done(self, i: int, completion: Completion) -> None:
        """One request finished: keep it; write its batch once the batch is whole; stop at the cap."""
        batch, key = self.order[i]
        self.waiting[batch.index][key] = (completion, time.monotonic() - self.start)
        if len(self.waiting[batch.index]) == len(batch.keys):
            got = self.waiting.pop(batch.index)
            self.write(batch, [got[k][0] for k in batch.keys], [got[k][1] for k in batch.keys])
        if self.wall.exceeded():
            raise _StopArm
