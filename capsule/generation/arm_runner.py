"""Run one arm: render inputs once, form and order batches, generate, append rows, resume, cap.

Everything is validated (settings, keys, output directory, an existing arm's identity) before a
model loads. Rows are written one whole batch at a time; a restart skips finished batches and
re-runs the others with identical composition, so a resumed greedy hf arm equals an uninterrupted
one row for row (timings aside). Cost caps stop after the current batch and mark the arm partial.
SIGINT/SIGTERM during a row write let the write finish; otherwise the batch in flight is discarded.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.artifacts.prompts import seeded_subsample
from capsule.errors import BadInputError
from capsule.generation.backends import (
    Backend,
    Completion,
    Request,
    check_backend,
    check_reusable,
    load_backend,
)
from capsule.generation.batching import Batch, execution_order, form_batches, request_seed
from capsule.generation.chat import ChatTokenizer, extract_answer, load_chat_tokenizer
from capsule.generation.store import ArmStore, arm_identity
from capsule.hashing import sha256_bytes, sha256_ids
from capsule.prereg.plan import Arm, Subset
from ifeval_scorer import Prompt


@dataclass(frozen=True)
class ArmResult:
    """What one `generate_arm` call left on disk."""

    arm: str
    rows_path: Path
    meta_path: Path
    n_keys: int
    n_rows: int  # rows on disk now (all segments)
    new_rows: int  # rows written by this call
    new_tokens: int
    complete: bool
    partial: bool
    reason: str
    elapsed_s: float  # this call


class _StopArm(Exception):
    """Raised inside a vLLM completion callback to stop an arm at a cost cap."""


class _Interrupts:
    """SIGINT/SIGTERM: raise at once outside a row write, or right after the write completes."""

    def __init__(self) -> None:
        self.in_write = False
        self.pending: str = ""

    def handler(self, signum: int, _frame: Any) -> None:
        self.pending = signal.Signals(signum).name
        if not self.in_write:
            raise KeyboardInterrupt(self.pending)

    @contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {s: signal.signal(s, self.handler) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    @contextmanager
    def writing(self) -> Iterator[None]:
        self.in_write = True
        try:
            yield
        finally:
            self.in_write = False
        if self.pending:
            raise KeyboardInterrupt(self.pending)


def validate_arm(arm: Arm) -> None:
    """Reject settings no backend can honour (the plan loader checks more; this guards ad-hoc runs)."""
    d = arm.decoding
    problems = []
    if arm.batch_size < 1 or arm.max_new_tokens < 1:
        problems.append("batch_size and max_new_tokens must be at least 1")
    if d.mode not in ("greedy", "sample"):
        problems.append(f"decoding.mode must be 'greedy' or 'sample', not {d.mode!r}")
    if d.mode == "sample" and (
        d.temperature <= 0 or not 0 < d.top_p <= 1 or not 0 <= d.min_p < 1 or d.repetition_penalty <= 0
    ):
        problems.append(
            "sampling needs temperature > 0, 0 < top_p <= 1, 0 <= min_p < 1, repetition_penalty > 0"
        )
    if arm.thinking not in ("on", "off") or arm.unclosed not in ("empty", "raw"):
        problems.append("thinking must be on|off and unclosed empty|raw")
    if problems:
        raise BadInputError(f"arm {arm.name!r}: " + "; ".join(problems))


def subset_keys(subset: Subset, prompts: dict[int, Prompt]) -> list[int]:
    """The keys a plan subset names, in file order ("all", "first" n) or the seeded sample's order."""
    keys = list(prompts)
    if subset.rule == "all":
        return keys
    if subset.rule == "first":
        return keys[: subset.n]
    if subset.rule == "seeded_sample":
        return seeded_subsample(keys, subset.n, subset.seed)
    raise BadInputError(
        f"subset {subset.name!r}: unknown rule {subset.rule!r}; use all | first | seeded_sample"
    )


def _rows(
    arm: Arm,
    batch: Batch,
    completions: list[Completion],
    inputs: dict[int, list[int]],
    prompts: dict[int, Prompt],
    tokenizer: ChatTokenizer,
    elapsed: list[float],
) -> list[dict[str, Any]]:
    rows = []
    for key, completion, seconds in zip(batch.keys, completions, elapsed, strict=True):
        raw = tokenizer.decode(list(completion.token_ids))
        response, closed = extract_answer(raw, arm.thinking, arm.unclosed)
        rows.append(
            {
                "key": key,
                "arm": arm.name,
                "prompt_sha256": sha256_bytes(prompts[key].prompt.encode("utf-8")),
                "input_ids_sha256": sha256_ids(inputs[key]),
                "n_prompt_tokens": len(inputs[key]),
                "raw": raw,
                "response": response,
                "thinking_closed": closed,
                "n_output_tokens": len(completion.token_ids),
                "finish_reason": completion.finish_reason,
                "batch_index": batch.index,
                "batch_keys_sha256": batch.keys_sha256,
                "batch_size": arm.batch_size,
                "seed": request_seed(arm.seed, key),
                "elapsed_s": round(seconds, 3),
            }
        )
    return rows


def _progress(total: int, enabled: bool, name: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, disable=not enabled, unit="prompt", desc=f"generate {name}", dynamic_ncols=True)


def generate_arm(
    arm: Arm,
    *,
    prompts: dict[int, Prompt],
    keys: list[int],
    model_dir: Path,
    out_dir: Path,
    plan_hash: str,
    manifest_digest: str,
    backend: Backend | None = None,
    progress: bool = True,
    tokenizer: ChatTokenizer | None = None,
    loader: str | None = None,
) -> ArmResult:
    """Generate (or resume) one arm into `out_dir/generations/<arm>.jsonl` + `.meta.json`.

    `backend` may be a loaded instance shared with other arms (see `capsule.generation.backends.reuse_key`);
    otherwise one is loaded after all validation, with the plan's [model] `loader` (None: no plan),
    and closed at the end. `tokenizer` defaults to the model directory's chat template.
    """
    validate_arm(arm)
    if backend is None:
        check_backend(arm.backend)
    else:
        check_reusable(backend, arm)
    missing = [k for k in keys if k not in prompts]
    if missing:
        raise BadInputError(f"arm {arm.name!r}: keys not in the prompt set: {missing[:5]}")
    store = ArmStore(out_dir, arm.name)
    store.check_writable()
    tokenizer = tokenizer or load_chat_tokenizer(model_dir)
    inputs = {k: tokenizer.render(prompts[k].prompt, arm.thinking) for k in keys}
    batches = form_batches(keys, {k: len(v) for k, v in inputs.items()}, arm.batch_size, arm.batch_order)
    identity = arm_identity(
        arm,
        batches,
        {k: sha256_ids(v) for k, v in inputs.items()},
        {"plan_hash": plan_hash, "tokenizer": tokenizer.describe()},
    )
    done = store.open(identity, batches)
    rows_before = sum(len(batches[i].keys) for i in done)
    todo = [batches[i] for i in execution_order(len(batches), arm.seed) if i not in done]
    if (
        not todo and store.persisted and store.meta.get("status") == "complete"
    ):  # nothing to do: touch nothing
        return ArmResult(
            arm.name, store.rows_path, store.meta_path, len(keys), rows_before, 0, 0, True, False, "", 0.0
        )
    if arm.max_prompts:  # cap counts whole batches in execution order, as an uncapped run would meet them
        budget, capped = arm.max_prompts - rows_before, []
        for batch in todo:
            if budget <= 0:
                break
            capped.append(batch)
            budget -= len(batch.keys)
        todo = capped
    store.start(arm, identity, plan_hash, manifest_digest)
    started = time.monotonic()
    spent_before = float(store.meta.get("elapsed_s", 0.0))
    owned = backend is None
    counters = {"rows": 0, "tokens": 0}
    reason = ""
    interrupts = _Interrupts()
    bar = _progress(len(keys) - rows_before, progress and bool(todo), arm.name)
    description: dict[str, Any] = {}

    def over_wall() -> bool:
        limit = arm.max_wall_minutes * 60
        return bool(limit) and spent_before + time.monotonic() - started >= limit

    def write(batch: Batch, completions: list[Completion], elapsed: list[float]) -> None:
        rows = _rows(arm, batch, completions, inputs, prompts, tokenizer, elapsed)
        with interrupts.writing():
            store.append_batch(rows)
        counters["rows"] += len(rows)
        counters["tokens"] += sum(r["n_output_tokens"] for r in rows)
        bar.update(len(rows))
        bar.set_postfix_str(f"{counters['tokens'] / max(time.monotonic() - started, 1e-9):.1f} tok/s")

    try:
        with interrupts.installed():
            if todo:
                backend = backend or load_backend(arm.backend, model_dir, arm, loader)
                description = backend.describe()
                if backend.scope == "batch":
                    reason = _run_batches(arm, backend, todo, inputs, write, over_wall)
                else:
                    reason = _run_whole_arm(arm, backend, todo, inputs, write, over_wall)
    except KeyboardInterrupt as interrupt:
        reason = f"interrupted by {interrupt.args[0] if interrupt.args else 'SIGINT'}"
        raise
    except BaseException as error:
        reason = f"failed: {type(error).__name__}: {error}"
        raise
    finally:
        bar.close()
        n_rows = rows_before + counters["rows"]
        complete = n_rows == len(keys)
        if not reason and not complete:
            reason = f"max_prompts={arm.max_prompts}" if arm.max_prompts else "stopped"
        store.finish(
            "complete" if complete else "partial",
            "" if complete else reason,
            description,
            time.monotonic() - started,
            {"n_rows": n_rows, "n_keys": len(keys)},
        )
        if owned and backend is not None:
            backend.close()
    return ArmResult(
        arm.name,
        store.rows_path,
        store.meta_path,
        len(keys),
        n_rows,
        counters["rows"],
        counters["tokens"],
        complete,
        not complete,
        "" if complete else reason,
        time.monotonic() - started,
    )


def _run_batches(
    arm: Arm, backend: Backend, todo: list[Batch], inputs: dict[int, list[int]], write: Any, over_wall: Any
) -> str:
    """hf: one generate call per batch, in execution order; caps checked between batches."""
    for batch in todo:
        if over_wall():
            return f"max_wall_minutes={arm.max_wall_minutes}"
        requests = [Request(k, tuple(inputs[k])) for k in batch.keys]
        seeds = [request_seed(arm.seed, k) for k in batch.keys]
        start = time.monotonic()
        completions = backend.generate(requests, arm.decoding, arm.max_new_tokens, seeds)
        write(batch, completions, [time.monotonic() - start] * len(completions))
    return ""


def _run_whole_arm(
    arm: Arm, backend: Backend, todo: list[Batch], inputs: dict[int, list[int]], write: Any, over_wall: Any
) -> str:
    """vLLM: every remaining request at once, in execution order; a batch is written when all its
    requests have finished. At the wall cap the rest is aborted (finished batches are kept)."""
    order = [(batch, k) for batch in todo for k in batch.keys]
    requests = [Request(k, tuple(inputs[k])) for _, k in order]
    seeds = [request_seed(arm.seed, k) for _, k in order]
    # batch index -> {key: (completion, seconds since submission)}
    waiting: dict[int, dict[int, tuple[Completion, float]]] = {b.index: {} for b in todo}
    start = time.monotonic()

    def on_done(i: int, completion: Completion) -> None:
        batch, key = order[i]
        waiting[batch.index][key] = (completion, time.monotonic() - start)
        if len(waiting[batch.index]) == len(batch.keys):
            got = waiting.pop(batch.index)
            write(batch, [got[k][0] for k in batch.keys], [got[k][1] for k in batch.keys])
        if over_wall():
            raise _StopArm

    try:
        backend.generate(requests, arm.decoding, arm.max_new_tokens, seeds, on_done=on_done)
    except _StopArm:
        return f"max_wall_minutes={arm.max_wall_minutes}"
    return ""
