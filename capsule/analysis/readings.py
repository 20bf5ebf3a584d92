"""The per-arm sections and the claim's readings of analysis.json: values, counts, intervals, verdicts.

Binomial intervals (Wilson, Clopper-Pearson) are computed for prompt-level metrics only; the
cluster bootstrap for every metric. Which of them a reading uses is `interval_kind`'s rule
(`capsule.prereg.metrics`), the one the report applies too.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from capsule.analysis.control_inputs import Rows
from capsule.analysis.outcomes import Outcomes, counts, parts, value
from capsule.analysis.paired_schema import Bounds, Interval
from capsule.analysis.schema import (
    ArmSection,
    ArmSettings,
    Closure,
    Count,
    MetricSection,
    Reading,
    Truncation,
)
from capsule.analysis.stats import (
    NOT_RUN,
    UNDERPOWERED,
    bootstrap_interval,
    claim_verdict,
    flips_binomial,
    flips_bootstrap,
    percent,
    proportion_interval,
    seeded_resample_counts,
)
from capsule.analysis.throughput import timing_scope, token_stats
from capsule.prereg.metrics import ALL_METRICS, interval_kind, is_prompt_level
from capsule.prereg.plan import Arm, Plan
from ifeval_scorer import Prompt


def planned_n(plan: Plan, arm: Arm, prompts: Mapping[int, Prompt] | None) -> int | None:
    """Prompts the arm's subset declares (None when it is "all" and the prompt file is not given)."""
    subset = plan.prompts.subsets.get(arm.subset)
    if subset is None:
        return None
    if subset.rule == "all":
        return len(prompts) if prompts is not None else None
    return subset.n


def _share(count: int, n: int) -> float | None:
    return percent(count / n) if n else None


def _bounds(interval: tuple[float, float]) -> Bounds:
    return Bounds(low_pct=percent(interval[0]), high_pct=percent(interval[1]))


def metric_section(outcomes: Outcomes, metric: str, confidence: float, boot: np.ndarray) -> MetricSection:
    """One metric of one arm: value, counts and intervals (binomial ones for prompt-level metrics;
    the cluster bootstrap over the arm's resamples `boot` for every metric)."""
    metric_parts = parts(outcomes, metric)
    intervals: dict[str, Bounds] = {}
    if is_prompt_level(metric):
        k, n = int(metric_parts[0][0].sum()), outcomes.n
        for kind in ("wilson", "clopper_pearson"):
            intervals[kind] = _bounds(proportion_interval(kind, k, n, confidence))
    intervals["bootstrap"] = _bounds(bootstrap_interval(metric_parts, boot, confidence))
    return MetricSection(
        value_pct=percent(value(metric_parts)),
        counts={name: Count(**count) for name, count in counts(outcomes, metric).items()},
        confidence=confidence,
        intervals=intervals,
    )


def arm_section(
    plan: Plan, arm: Arm, rows: Rows, outcomes: Outcomes | None, prompts: Mapping[int, Prompt] | None,
    refused: str | None = None,
) -> ArmSection:
    """Per arm: prompt counts (planned, generated, scored, partial), settings, metrics with
    intervals, thinking closure, truncation at the token cap and token statistics; `refused`: the
    engine's message when the backend refused the arm at load (the arm then has no rows)."""
    rule = plan.verdict
    planned = planned_n(plan, arm, prompts)
    n_scored = outcomes.n if outcomes is not None else 0
    metrics: dict[str, MetricSection] = {}
    if outcomes is not None:
        boot = seeded_resample_counts(outcomes.n, rule.bootstrap_resamples, rule.bootstrap_seed)
        metrics = {m: metric_section(outcomes, m, rule.confidence, boot) for m in ALL_METRICS}
    closed = sum(1 for row in rows if row.get("thinking_closed") is True)
    unclosed = sum(1 for row in rows if row.get("thinking_closed") is False)
    truncated = sum(1 for row in rows if row.get("finish_reason") == "length")
    settings = ArmSettings(
        backend=arm.backend,
        dtype=arm.dtype,
        batch_size=arm.batch_size,
        seed=arm.seed,
        max_new_tokens=arm.max_new_tokens,
        thinking=arm.thinking,
        decoding=arm.decoding.mode,
    )
    return ArmSection(
        n=len(rows),
        n_scored=n_scored,
        n_planned=planned,
        partial=planned is not None and min(len(rows), n_scored) < planned,
        settings=settings,
        metrics=metrics,
        closure=Closure(closed, unclosed, _share(closed, closed + unclosed)),
        truncation=Truncation(truncated, _share(truncated, len(rows))),
        tokens=token_stats(rows, timing_scope(arm)),
        refused=refused,
    )


def reading_section(
    plan: Plan, metric: str, outcomes: Outcomes | None, not_run: str | None = None
) -> Reading:
    """The claim read as `metric` on the verdict arm: interval, verdict and flips to reverse it.
    `not_run`: the verdict arm was refused ("not run: refused (...)"); the verdict is then NOT RUN."""
    rule, claim = plan.verdict, plan.claim.value / 100.0
    kind = interval_kind(metric, rule.interval)
    n = outcomes.n if outcomes is not None else 0
    empty = Reading(
        metric=metric,
        arm=rule.arm,
        claim_pct=plan.claim.value,
        n=n,
        min_n=rule.min_n,
        interval=None,
        value_pct=None,
        verdict=NOT_RUN if not_run else UNDERPOWERED,
        flips_to_reverse=None,
        not_run=not_run,
    )
    if not_run or outcomes is None or n == 0:
        return empty
    metric_parts = parts(outcomes, metric)
    flips: int | None = None
    if kind == "bootstrap":
        boot = seeded_resample_counts(n, rule.bootstrap_resamples, rule.bootstrap_seed)
        interval = bootstrap_interval(metric_parts, boot, rule.confidence)
        verdict = claim_verdict(claim, interval, n, rule.min_n)
        if verdict != UNDERPOWERED:
            flips = flips_bootstrap(metric_parts, claim, boot, rule.confidence)
    else:
        k = int(metric_parts[0][0].sum())
        interval = proportion_interval(kind, k, n, rule.confidence)
        verdict = claim_verdict(claim, interval, n, rule.min_n)
        if verdict != UNDERPOWERED:
            flips = flips_binomial(k, n, claim, kind, rule.confidence)
    return Reading(
        metric=metric,
        arm=rule.arm,
        claim_pct=plan.claim.value,
        n=n,
        min_n=rule.min_n,
        interval=Interval(percent(interval[0]), percent(interval[1]), kind, rule.confidence),
        value_pct=percent(value(metric_parts)),
        verdict=verdict,
        flips_to_reverse=flips,
    )
