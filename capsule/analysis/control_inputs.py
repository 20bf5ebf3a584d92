"""What every control runner reads: the plan, the arms' rows and outcomes, and the scorer.

A runner is `runner(control, inputs) -> section` (named per kind in `capsule.prereg.control_kinds`);
the generation controls read the rows and outcomes, the scorer controls also call the scorer
through `score_fn` and `band_fn`, so they are tested with small stand-ins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from capsule.analysis.divergence import Tokenize
from capsule.analysis.outcomes import Outcomes
from capsule.prereg.plan import Plan
from ifeval_scorer import Prompt

Rows = Sequence[Mapping[str, Any]]
#: `score_fn(rows, seed) -> score rows` (seed None: unseeded, as the official scorer runs).
ScoreFn = Callable[[Sequence[Mapping[str, Any]], int | None], list[dict[str, Any]]]
#: `band_fn(rows) -> the scorer's letter band` (a plain mapping).
BandFn = Callable[[Sequence[Mapping[str, Any]]], Mapping[str, Any]]


@dataclass(frozen=True)
class ControlInputs:
    """The plan, each arm's generation rows and scored outcomes, and what the scorer controls need:
    the scorer, the prompts and the stored unseeded runs (control name -> runs)."""

    plan: Plan
    generations: Mapping[str, Rows]
    outcomes: Mapping[str, Outcomes]
    tokenize: Tokenize | None = None
    score_fn: ScoreFn | None = None
    band_fn: BandFn | None = None
    prompts: Mapping[int, Prompt] | None = None
    stability: Mapping[str, Sequence[Rows]] | None = None
    refused: Mapping[str, str] | None = None  # arm -> the engine's message, for arms refused at load

    def refused_among(self, arms: Sequence[str]) -> dict[str, str]:
        """Those of `arms` the backend refused, with the engine's message."""
        return {arm: (self.refused or {})[arm] for arm in arms if arm in (self.refused or {})}
