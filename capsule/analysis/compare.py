"""Two runs of one plan compared arm by arm: the statistics `capsule compare` prints.

`capsule.evidence.compare` checks both runs first (complete, verified, the same plan bytes); this
module then compares them. Per arm, on the prompts both runs scored: how many responses are
byte-identical, where the others first diverge, and the difference A - B on every metric with exact
McNemar and a paired bootstrap interval at the plan's verdict confidence, resamples and seed (read
from run A's analysis, the same plan as B's). The claim's verdict and every sealed comparison's
verdict are set side by side. Everything returned is JSON-ready (`capsule.report.comparison` renders it).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from capsule.analysis.divergence import identity_contrast
from capsule.analysis.outcomes import outcomes_from_scores
from capsule.analysis.paired import paired_comparison
from capsule.analysis.schema import Analysis
from capsule.jsonio import read_jsonl_complete
from capsule.prereg.metrics import ALL_METRICS
from capsule.prereg.plan import VerdictRule
from capsule.run_dir import RunDir

LABELS = ("A", "B")


def _rows(run: RunDir, arm: str, scores: bool) -> list[dict[str, Any]]:
    return read_jsonl_complete(run.scores(arm) if scores else run.generations(arm))


def compare_arm(rule: VerdictRule, metric_of_claim: str, arm: str, run_a: RunDir, run_b: RunDir
                ) -> dict[str, Any]:
    """Identity, first divergence and every metric's paired difference for one arm of both runs."""
    identity = identity_contrast(_rows(run_a, arm, False), _rows(run_b, arm, False))
    scores_a, scores_b = _rows(run_a, arm, True), _rows(run_b, arm, True)
    outcomes_a = outcomes_from_scores(scores_a, run_a.scores(arm).as_posix()) if scores_a else None
    outcomes_b = outcomes_from_scores(scores_b, run_b.scores(arm).as_posix()) if scores_b else None
    metrics = {
        metric: asdict(paired_comparison(
            LABELS, outcomes_a, outcomes_b, metric, float(rule.confidence),
            min_pairs=int(rule.min_pairs), resamples=int(rule.bootstrap_resamples),
            seed=int(rule.bootstrap_seed),
        ))
        for metric in ALL_METRICS
    }
    prompt_flips = metrics[metric_of_claim]["b"] + metrics[metric_of_claim]["c"]
    return {
        "arm": arm,
        "identity": asdict(identity),
        "metrics": metrics,
        "pass_fail_changed": prompt_flips,
    }


def comparison_verdicts(analysis_a: Analysis, analysis_b: Analysis) -> dict[str, Any]:
    """Every sealed comparison's verdict in run A and run B (None where a run lacks it), and whether
    they agree."""
    out: dict[str, Any] = {}
    for name in sorted(set(analysis_a.comparisons) | set(analysis_b.comparisons)):
        found = (analysis_a.comparisons.get(name), analysis_b.comparisons.get(name))
        va, vb = (None if section is None else section.verdict for section in found)
        out[name] = {"A": va, "B": vb, "agree": va == vb}
    return out


def claim_verdicts(analysis_a: Analysis, analysis_b: Analysis) -> dict[str, Any]:
    """The claim (its verdict arm, metric and value) with each run's headline verdict side by side."""
    rule, claim = analysis_a.verdict_rule, analysis_a.claim
    verdict_a, verdict_b = analysis_a.headline.verdict, analysis_b.headline.verdict
    return {
        "arm": rule.arm, "metric": claim.metric, "value_pct": claim.value_pct,
        "A": verdict_a, "B": verdict_b, "agree": verdict_a == verdict_b,
    }


def compare_arms(analysis_a: Analysis, arm_names: list[str], run_a: RunDir, run_b: RunDir
                 ) -> list[dict[str, Any]]:
    """`compare_arm` for each of `arm_names`, under run A's verdict rule and claim metric."""
    rule, metric = analysis_a.verdict_rule, analysis_a.claim.metric
    return [compare_arm(rule, metric, arm, run_a, run_b) for arm in arm_names]
