"""The schema of analysis.json: the dataclasses the analysis writes and the report, plots and numbers read.

`capsule.analysis.codec` alone turns them into JSON and back (`write_analysis`, `read_analysis`), so
a file read and written again is byte-identical. Percentages are floats in percent (2 decimals), as
`capsule.analysis.stats.percent` rounds them. The control sections live in
`capsule.analysis.control_schema`, the paired test and intervals in `capsule.analysis.paired_schema`.
"""

from __future__ import annotations

from dataclasses import dataclass

from capsule.analysis.control_schema import ControlSection
from capsule.analysis.fields import omittable
from capsule.analysis.paired_schema import Bounds, Interval, Paired
from capsule.prereg.metrics import interval_kind
from capsule.prereg.plan import VerdictRule

SCHEMA = "capsule.analysis/1"


@dataclass(frozen=True)
class Count:
    """Passed of total (prompts or instructions) behind a metric."""

    passed: int
    total: int


@dataclass(frozen=True)
class MetricSection:
    """One metric of one arm: value, the counts of each member, every interval computed for it."""

    value_pct: float
    counts: dict[str, Count]
    confidence: float
    intervals: dict[str, Bounds]  # "bootstrap" always; "wilson", "clopper_pearson" for prompt level

    def interval(self, metric: str, requested: str) -> Bounds | None:
        """The interval this metric is read with under the plan's `requested` kind (`interval_kind`)."""
        return self.intervals.get(interval_kind(metric, requested))


@dataclass(frozen=True)
class ArmSettings:
    """The arm settings the report shows."""

    backend: str
    dtype: str
    batch_size: int
    seed: int
    max_new_tokens: int
    thinking: str
    decoding: str


@dataclass(frozen=True)
class Closure:
    """Rows whose thinking block closed or did not (models without thinking: both 0)."""

    closed: int
    unclosed: int
    closed_pct: float | None


@dataclass(frozen=True)
class Truncation:
    """Rows that stopped at the token cap."""

    truncated: int
    truncated_pct: float | None


@dataclass(frozen=True)
class TokenStats:
    """Output tokens per response, generation wall time and throughput (`capsule.analysis.throughput`)."""

    median: float | None
    mean: float | None
    max: int | None
    total: int
    wall_s: float
    tokens_per_s: float | None


@dataclass(frozen=True)
class ArmSection:
    """Per arm: prompt counts, settings, metrics with intervals, closure, truncation, tokens."""

    n: int
    n_scored: int
    n_planned: int | None
    partial: bool
    settings: ArmSettings
    metrics: dict[str, MetricSection]
    closure: Closure
    truncation: Truncation
    tokens: TokenStats
    refused: str | None = omittable()  # the backend refused the arm at load: the engine's message


@dataclass(frozen=True)
class ComparisonSection(Paired):
    """A plan's paired comparison: the paired test and the plan's description of it."""

    description: str
    not_run: str | None = omittable()  # an arm it needs was refused: "not run: refused (...)"


@dataclass(frozen=True)
class Reading:
    """The claim read as one metric on the verdict arm: value, interval, verdict, flips to reverse it."""

    metric: str
    arm: str
    claim_pct: float
    n: int
    min_n: int
    interval: Interval | None
    value_pct: float | None
    verdict: str
    flips_to_reverse: int | None
    not_run: str | None = omittable()  # the verdict arm was refused: "not run: refused (...)"


@dataclass(frozen=True)
class Headline:
    """The primary reading's verdict, every reading, and whether any control failed."""

    verdict: str
    readings: list[Reading]
    failed_controls: bool


@dataclass(frozen=True)
class PlanInfo:
    """Which plan the analysis applied."""

    name: str
    scorer_seed: int


@dataclass(frozen=True)
class ClaimInfo:
    """The claim under test, as the plan reads it."""

    text: str
    value_pct: float
    metric: str
    other_readings: list[str]
    source: str


@dataclass(frozen=True)
class Analysis:
    """The whole of analysis.json."""

    schema: str
    plan: PlanInfo
    claim: ClaimInfo
    verdict_rule: VerdictRule
    arms: dict[str, ArmSection]
    comparisons: dict[str, ComparisonSection]
    controls: dict[str, ControlSection]
    headline: Headline
    failed_controls: list[str]
    skipped_controls: list[str]
    refused_arms: dict[str, str] | None = omittable()  # arm -> the engine's message; absent: none
