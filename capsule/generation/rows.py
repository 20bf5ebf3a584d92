"""One batch's rows: rendered inputs in, rows built from the completions, appended whole, counted.

A batch is written in one durable append through the arm's store. SIGINT/SIGTERM arriving during
that write let it finish and are raised right after, so the file never holds part of a batch;
outside a write they raise at once and the batch in flight is discarded (a resume re-runs it).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from capsule.generation.backends import Completion
from capsule.generation.batching import Batch, arm_request_seed
from capsule.generation.chat import ChatTokenizer, extract_answer
from capsule.generation.store import ArmStore
from capsule.hashing import sha256_bytes, sha256_ids
from capsule.prereg.plan import Arm
from ifeval_scorer import Prompt


class Interrupts:
    """SIGINT/SIGTERM: raise at once outside a row write, or right after the write completes."""

    def __init__(self) -> None:
        self.in_write = False
        self.pending: str = ""

    def handler(self, signum: int, _frame: Any) -> None:
        """The signal handler: remember the signal; raise now unless a write is under way."""
        self.pending = signal.Signals(signum).name
        if not self.in_write:
            raise KeyboardInterrupt(self.pending)

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Install the handler for the block (main thread only; elsewhere signals are not ours)."""
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
        """A row write that a signal may not cut; a signal that came meanwhile is raised after it."""
        self.in_write = True
        try:
            yield
        finally:
            self.in_write = False
        if self.pending:
            raise KeyboardInterrupt(self.pending)


def render_inputs(
    tokenizer: ChatTokenizer, prompts: Mapping[int, Prompt], keys: tuple[int, ...], thinking: str
) -> dict[int, list[int]]:
    """Each key's chat-rendered input ids, rendered once so every backend sees the same ids."""
    return {k: tokenizer.render(prompts[k].prompt, thinking) for k in keys}


def batch_rows(
    arm: Arm,
    batch: Batch,
    completions: list[Completion],
    inputs: Mapping[int, list[int]],
    prompts: Mapping[int, Prompt],
    tokenizer: ChatTokenizer,
    elapsed: list[float],
) -> list[dict[str, Any]]:
    """The generation rows of one finished batch (DESIGN.md's row format), in the batch's key order."""
    rows = []
    for key, completion, seconds in zip(batch.keys, completions, elapsed, strict=True):
        raw = tokenizer.decode(list(completion.token_ids))
        response, closed = extract_answer(raw, arm.thinking, arm.unclosed)
        row: dict[str, Any] = {
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
            "seed": arm_request_seed(arm.seed, key, arm.backend_options),
            "elapsed_s": round(seconds, 3),
        }
        if completion.request is not None:  # per-request observations (server backend); absent otherwise
            row["request"] = dict(completion.request)
        rows.append(row)
    return rows


def progress_bar(total: int, enabled: bool, name: str) -> Any:
    """A tqdm bar counting prompts (disabled: a no-op bar, so callers never branch)."""
    from tqdm import tqdm

    return tqdm(total=total, disable=not enabled, unit="prompt", desc=f"generate {name}", dynamic_ncols=True)


class RowWriter:
    """Writes each finished batch through the arm's store and counts what this call wrote."""

    def __init__(
        self,
        arm: Arm,
        inputs: Mapping[int, list[int]],
        prompts: Mapping[int, Prompt],
        tokenizer: ChatTokenizer,
        store: ArmStore,
        bar: Any,
        started: float,
        interrupts: Interrupts,
    ) -> None:
        self.arm, self.inputs, self.prompts, self.tokenizer = arm, inputs, prompts, tokenizer
        self.store, self.bar = store, bar
        self.interrupts = interrupts  # installed by the caller: a signal during a write waits for it
        self.started = started  # the segment's start: tok/s counts from there
        self.rows = 0
        self.tokens = 0

    def write(self, batch: Batch, completions: list[Completion], elapsed: list[float]) -> None:
        """Append one batch's rows in one uninterruptible write; advance the counters and the bar."""
        rows = batch_rows(self.arm, batch, completions, self.inputs, self.prompts, self.tokenizer, elapsed)
        with self.interrupts.writing():
            self.store.append_batch(rows)
        self.rows += len(rows)
        self.tokens += sum(r["n_output_tokens"] for r in rows)
        self.bar.update(len(rows))
        self.bar.set_postfix_str(f"{self.tokens / max(time.monotonic() - self.started, 1e-9):.1f} tok/s")
