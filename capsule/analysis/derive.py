"""Apply a sealed plan's comparisons, controls and verdict rule to generation and score rows.

`build_analysis` is a pure function of its inputs: the same files give the same dict, and written
with `capsule.atomic.write_json_atomic` the same bytes. Percentages are stored to 2 decimals,
p-values to 4 significant digits, and every bootstrap draws from `default_rng(bootstrap_seed)`.
Partial arms are analysed on the prompts they have; comparisons use the keys both arms scored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from capsule.analysis.controls import GENERATION_CONTROLS, ControlInputs, run_generation_control
from capsule.analysis.divergence import Tokenize
from capsule.analysis.outcomes import Outcomes, counts, is_prompt_level, outcomes_from_scores, parts, value
from capsule.analysis.paired import paired_comparison
from capsule.analysis.scorer_controls import BandFn, ScoreFn, scorer_sanity, scorer_stability, stability_runs
from capsule.analysis.stats import (
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
from capsule.errors import BadInputError
from capsule.prereg.metrics import ALL_METRICS
from capsule.prereg.plan import Arm, Control, Plan
from ifeval_scorer import Prompt

SCHEMA = "capsule.analysis/1"
Rows = Sequence[Mapping[str, Any]]


def interval_kind(metric: str, requested: str) -> str:
    """The interval a reading uses: the rule's kind for a prompt-level proportion, else the bootstrap
    (Wilson and Clopper-Pearson assume independent binary trials, which pooled instructions and
    composites are not)."""
    return requested if is_prompt_level(metric) else "bootstrap"


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


def metric_section(outcomes: Outcomes, metric: str, confidence: float, boot: np.ndarray) -> dict[str, Any]:
    """One metric of one arm: value, counts and intervals (binomial ones for prompt-level metrics;
    the cluster bootstrap over the arm's resamples `boot` for every metric)."""
    metric_parts = parts(outcomes, metric)
    intervals: dict[str, Any] = {}
    if is_prompt_level(metric):
        k, n = int(metric_parts[0][0].sum()), outcomes.n
        for kind in ("wilson", "clopper_pearson"):
            low, high = proportion_interval(kind, k, n, confidence)
            intervals[kind] = {"low_pct": percent(low), "high_pct": percent(high)}
    low, high = bootstrap_interval(metric_parts, boot, confidence)
    intervals["bootstrap"] = {"low_pct": percent(low), "high_pct": percent(high)}
    return {
        "value_pct": percent(value(metric_parts)),
        "counts": counts(outcomes, metric),
        "confidence": confidence,
        "intervals": intervals,
    }


def arm_section(
    plan: Plan, arm: Arm, rows: Rows, outcomes: Outcomes | None, prompts: Mapping[int, Prompt] | None
) -> dict[str, Any]:
    """Per arm: prompt counts (planned, generated, scored, partial), settings, metrics with
    intervals, thinking closure, truncation at the token cap and token statistics."""
    rule = plan.verdict
    planned = planned_n(plan, arm, prompts)
    n_scored = outcomes.n if outcomes is not None else 0
    metrics: dict[str, Any] = {}
    if outcomes is not None:
        boot = seeded_resample_counts(outcomes.n, rule.bootstrap_resamples, rule.bootstrap_seed)
        metrics = {m: metric_section(outcomes, m, rule.confidence, boot) for m in ALL_METRICS}
    closed = sum(1 for row in rows if row.get("thinking_closed") is True)
    unclosed = sum(1 for row in rows if row.get("thinking_closed") is False)
    truncated = sum(1 for row in rows if row.get("finish_reason") == "length")
    return {
        "n": len(rows),
        "n_scored": n_scored,
        "n_planned": planned,
        "partial": planned is not None and min(len(rows), n_scored) < planned,
        "settings": {
            "backend": arm.backend,
            "dtype": arm.dtype,
            "batch_size": arm.batch_size,
            "seed": arm.seed,
            "max_new_tokens": arm.max_new_tokens,
            "thinking": arm.thinking,
            "decoding": arm.decoding.mode,
        },
        "metrics": metrics,
        "closure": {"closed": closed, "unclosed": unclosed, "closed_pct": _share(closed, closed + unclosed)},
        "truncation": {"truncated": truncated, "truncated_pct": _share(truncated, len(rows))},
        "tokens": token_stats(rows, timing_scope(arm)),
    }


def reading_section(plan: Plan, metric: str, outcomes: Outcomes | None) -> dict[str, Any]:
    """The claim read as `metric` on the verdict arm: interval, verdict and flips to reverse it."""
    rule, claim = plan.verdict, plan.claim.value / 100.0
    kind = interval_kind(metric, rule.interval)
    n = outcomes.n if outcomes is not None else 0
    section: dict[str, Any] = {
        "metric": metric,
        "arm": rule.arm,
        "claim_pct": plan.claim.value,
        "n": n,
        "min_n": rule.min_n,
        "interval": None,
        "value_pct": None,
        "verdict": UNDERPOWERED,
        "flips_to_reverse": None,
    }
    if outcomes is None or n == 0:
        return section
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
    return {
        **section,
        "value_pct": percent(value(metric_parts)),
        "verdict": verdict,
        "flips_to_reverse": flips,
        "interval": {
            "kind": kind,
            "confidence": rule.confidence,
            "low_pct": percent(interval[0]),
            "high_pct": percent(interval[1]),
        },
    }


def _control(
    control: Control,
    plan: Plan,
    inputs: ControlInputs,
    *,
    score_fn: ScoreFn,
    band_fn: BandFn,
    prompts: Mapping[int, Prompt] | None,
    stability: Mapping[str, Sequence[Rows]] | None,
) -> tuple[dict[str, Any], list[str]]:
    if control.kind in GENERATION_CONTROLS:
        return run_generation_control(control, inputs)
    if control.kind == "scorer_stability":
        if not inputs.generations.get(control.arms[0]):
            return {"kind": control.kind, "arms": list(control.arms), "skipped": "no generations"}, []
        runs = (stability or {}).get(control.name)
        if runs is None:
            runs = stability_runs(control, inputs.generations, score_fn)
        return scorer_stability(control, inputs.generations, inputs.outcomes, runs, band_fn)
    if control.kind == "scorer_sanity":
        if control.arms and not inputs.generations.get(control.arms[0]):
            return {"kind": control.kind, "arms": list(control.arms), "skipped": "no generations"}, []
        return scorer_sanity(
            control, plan.path.parent, inputs.generations, score_fn, plan.scorer_seed, prompts
        )
    raise BadInputError(f"control {control.name!r}: unknown kind {control.kind!r}")


def build_analysis(
    plan: Plan,
    generations: Mapping[str, Rows],
    scores: Mapping[str, Rows],
    *,
    score_fn: ScoreFn,
    band_fn: BandFn,
    tokenize: Tokenize | None = None,
    prompts: Mapping[int, Prompt] | None = None,
    stability_scores: Mapping[str, Sequence[Rows]] | None = None,
) -> dict[str, Any]:
    """The analysis.json dict: per arm, per comparison, per control, the headline and failed controls.

    `generations` and `scores` map arm name -> rows (missing or empty arms are allowed: their
    sections say so). `score_fn(rows, seed)` and `band_fn(rows)` are the scorer, used by the scorer
    controls; `stability_scores` maps a scorer_stability control's name to its stored unseeded runs
    (from `capsule.analysis.scorer_controls.stability_runs`); without it the runs are made here, and the
    result is then no longer a pure function of the files. `tokenize` counts first-divergence
    indices in model tokens (default: characters). `prompts` is needed by scorer_sanity and to
    know how many prompts an "all" subset plans.
    """
    outcomes = {
        arm: outcomes_from_scores(rows, f"scores/{arm}.jsonl") for arm, rows in scores.items() if rows
    }
    rule = plan.verdict
    arms = {
        arm.name: arm_section(plan, arm, generations.get(arm.name, []), outcomes.get(arm.name), prompts)
        for arm in plan.arms
    }
    comparisons = {
        c.name: {
            **paired_comparison(
                c.arms,
                outcomes.get(c.arms[0]),
                outcomes.get(c.arms[1]),
                c.metric,
                c.confidence,
                min_pairs=rule.min_pairs,
                resamples=rule.bootstrap_resamples,
                seed=rule.bootstrap_seed,
            ),
            "description": c.description,
        }
        for c in plan.comparisons
    }
    inputs = ControlInputs(plan=plan, generations=generations, outcomes=outcomes, tokenize=tokenize)
    controls: dict[str, Any] = {}
    failed: list[str] = []
    for control in plan.controls:
        section, failures = _control(
            control,
            plan,
            inputs,
            score_fn=score_fn,
            band_fn=band_fn,
            prompts=prompts,
            stability=stability_scores,
        )
        controls[control.name] = {**section, "failures": failures}
        if failures:
            failed.append(control.name)
    metrics = list(dict.fromkeys((plan.claim.metric, *plan.claim.other_readings)))
    readings = [reading_section(plan, metric, outcomes.get(rule.arm)) for metric in metrics]
    return {
        "schema": SCHEMA,
        "plan": {"name": plan.name, "scorer_seed": plan.scorer_seed},
        "claim": {
            "text": plan.claim.text,
            "value_pct": plan.claim.value,
            "metric": plan.claim.metric,
            "other_readings": list(plan.claim.other_readings),
            "source": plan.claim.source,
        },
        "verdict_rule": dataclasses.asdict(rule),
        "arms": arms,
        "comparisons": comparisons,
        "controls": controls,
        "headline": {
            "verdict": readings[0]["verdict"],
            "readings": readings,
            "failed_controls": bool(failed),
        },
        "failed_controls": sorted(failed),
        "skipped_controls": sorted(name for name, section in controls.items() if "skipped" in section),
    }
