"""The printed summary of a scoring run: the four metrics in points, and optionally the letter band.

One format for every front end (`python -m ifeval_scorer`, the capsule's `capsule score`).
"""

from __future__ import annotations

from pathlib import Path

from ifeval_scorer.band import Band
from ifeval_scorer.scores import METRICS, Scores


def _points(value: float) -> str:
    return f"{100 * value:6.2f}"


def summary_lines(scores: Scores, written: Path, band: Band | None = None) -> list[str]:
    """Lines saying how many responses were scored and where to, each metric's accuracy in points
    with passed/total, and (given a band) each metric's lowest .. highest value over the letters."""
    tallies = scores.tallies
    lines = [f"scored {len(scores.prompts)} responses (seed {scores.seed}) -> {written}"]
    for name in METRICS:
        tally = tallies[name]
        lines.append(f"{name:<24} {_points(tally.accuracy)}  ({tally.passed}/{tally.total})")
    if band is not None:
        keys = ", ".join(str(key) for key in band.ambiguous_keys) or "none"
        lines.append(f"ambiguity band over the 52 letters (random-letter prompts: {keys}):")
        for name in METRICS:
            lines.append(f"{name:<24} {_points(band.low[name])} .. {_points(band.high[name])}")
    return lines
