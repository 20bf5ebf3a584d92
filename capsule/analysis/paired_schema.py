"""The schema of intervals and paired tests in analysis.json (see `capsule.analysis.schema`).

Shared by the arm sections, the readings, the plan's comparisons and the generation controls, so
every interval and every paired number has one shape.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bounds:
    """An interval's ends, in percent."""

    low_pct: float
    high_pct: float


@dataclass(frozen=True)
class Interval(Bounds):
    """An interval with its kind ("wilson", "clopper_pearson", "bootstrap") and level."""

    kind: str
    confidence: float


@dataclass(frozen=True)
class DifferenceInterval(Interval):
    """A paired bootstrap interval of a difference, with its resamples and seed."""

    resamples: int
    seed: int


@dataclass(frozen=True)
class Difference:
    """metric(a) - metric(b) in points, its interval, and whether the interval excludes 0."""

    value_pct: float
    interval: DifferenceInterval
    excludes_zero: bool


@dataclass(frozen=True)
class Paired:
    """A paired comparison of two arms on their common prompts (`capsule.analysis.paired`)."""

    arms: list[str]
    metric: str
    confidence: float
    n_pairs: int
    only_in: dict[str, int]  # arm -> prompts it scored that the other did not
    missing_arms: list[str]
    rule: str
    b: int  # prompts passing in a but not in b
    c: int  # the reverse
    p_value: float
    values_pct: dict[str, float] | None
    difference: Difference | None
    verdict: str
