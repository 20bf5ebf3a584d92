"""Output-token statistics and throughput of one arm, from its generation rows.

What a row's `elapsed_s` means depends on how much of the arm one backend call takes
(`capsule.generation.backends.Backend.scope`, written by `capsule.generation.arm_runner`):

- scope "batch" (transformers; the fake backend by default): every row of a batch carries that
  batch's generate time, so the arm's wall time is the sum over batches of the batch's time;
- scope "arm" (vLLM): one call takes the whole arm and each row carries the time from the start
  of that call to its own completion; batches are written in completion order, so the clock only
  restarts when the arm was resumed. Wall time is the sum, over such segments, of the largest
  time seen.

Model loading is never included, so tokens/s is generation throughput.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from capsule.analysis.schema import TokenStats
from capsule.prereg.backend_options import call_scope
from capsule.prereg.plan import Arm

Rows = Sequence[Mapping[str, Any]]


def timing_scope(arm: Arm) -> str:
    """ "arm" for backends that take the whole arm in one call, else "batch" (the backend's declared
    scope, `capsule.prereg.backend_options.call_scope`)."""
    return call_scope(arm.backend, arm.backend_options)


def _batch_times(rows: Rows) -> list[float]:
    """Largest `elapsed_s` per batch, batches in file order (rows without `batch_index` stand alone)."""
    times: dict[Any, float] = {}
    for number, row in enumerate(rows):
        batch = row.get("batch_index", f"row{number}")
        times[batch] = max(times.get(batch, 0.0), float(row.get("elapsed_s") or 0.0))
    return list(times.values())


def wall_seconds(rows: Rows, scope: str) -> float:
    """Generation wall time of an arm's rows under `scope` (see the module docstring)."""
    times = _batch_times(rows)
    if scope == "batch":
        return sum(times)
    wall, segment_max, previous = 0.0, 0.0, -1.0
    for time in times:
        if time < previous:  # the clock restarted: a resumed run
            wall += segment_max
            segment_max = 0.0
        segment_max = max(segment_max, time)
        previous = time
    return wall + segment_max


def _round(x: float) -> float:
    return round(float(x), 2) + 0.0


def token_stats(rows: Rows, scope: str = "batch") -> TokenStats:
    """Output-token median / mean / max / total, generation wall time and tokens per second."""
    tokens = [int(row.get("n_output_tokens", 0)) for row in rows]
    if not tokens:
        return TokenStats(median=None, mean=None, max=None, total=0, wall_s=0.0, tokens_per_s=None)
    wall = wall_seconds(rows, scope)
    return TokenStats(
        median=_round(statistics.median(tokens)),
        mean=_round(sum(tokens) / len(tokens)),
        max=max(tokens),
        total=sum(tokens),
        wall_s=_round(wall),
        tokens_per_s=_round(sum(tokens) / wall) if wall > 0 else None,
    )
