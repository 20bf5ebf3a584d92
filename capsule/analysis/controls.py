"""The generation controls: rerun identity, batch-size and backend contrasts, seed vs batch.

Each runner returns its control's section of analysis.json (`capsule.analysis.control_schema`),
with the reasons it failed in `failures` (empty when it passed). A control whose arms have no
generations yet is returned as skipped rather than failed: a partial run can still be analysed,
and the section says what is missing. The scorer controls live in `capsule.analysis.scorer_controls`;
`capsule.prereg.control_kinds` names the runner of each kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from capsule.analysis.control_inputs import ControlInputs
from capsule.analysis.control_schema import (
    ContrastPair,
    ContrastSection,
    ControlSection,
    IdentityPair,
    PairSettings,
    RerunSection,
    SeedVsBatchSection,
    SkippedControl,
    SourcePair,
    SourceSummary,
)
from capsule.analysis.divergence import identity_contrast
from capsule.analysis.fields import fields_of
from capsule.analysis.paired import paired_comparison
from capsule.analysis.paired_schema import Paired
from capsule.generation.refused_arms import not_run_text
from capsule.prereg.plan import Control


def missing_arms(control: Control, inputs: ControlInputs) -> list[str]:
    """The control's arms with no generation rows (not run yet, or named wrongly)."""
    return [arm for arm in control.arms if not inputs.generations.get(arm)]


def refused_control(control: Control, inputs: ControlInputs) -> SkippedControl | None:
    """The section of a control one of whose arms the backend refused (None: none was)."""
    refused = inputs.refused_among(control.arms)
    if not refused:
        return None
    return SkippedControl(
        kind=control.kind,
        arms=list(control.arms),
        skipped=not_run_text(refused),
        failures=[],
        description=control.description,
        refused=refused,
    )


def _skipped(control: Control, inputs: ControlInputs) -> SkippedControl | None:
    refused = refused_control(control, inputs)
    if refused is not None:
        return refused
    missing = missing_arms(control, inputs)
    if not missing:
        return None
    return SkippedControl(
        kind=control.kind,
        arms=list(control.arms),
        skipped=f"no generations for arm(s) {', '.join(missing)}",
        failures=[],
        description=control.description,
    )


def _identity(a: str, b: str, inputs: ControlInputs) -> tuple[IdentityPair, list[str]]:
    contrast = identity_contrast(inputs.generations[a], inputs.generations[b], inputs.tokenize)
    failures = []
    if contrast.input_ids_mismatch:
        failures.append(
            f"{a} vs {b}: input ids differ on {len(contrast.input_ids_mismatch)} prompts "
            "(the arms did not receive identical inputs)"
        )
    return IdentityPair(**fields_of(contrast), arms=[a, b]), failures


def _paired(a: str, b: str, inputs: ControlInputs) -> Paired:
    rule = inputs.plan.verdict
    return paired_comparison(
        (a, b),
        inputs.outcomes.get(a),
        inputs.outcomes.get(b),
        rule.metric,
        rule.confidence,
        min_pairs=rule.min_pairs,
        resamples=rule.bootstrap_resamples,
        seed=rule.bootstrap_seed,
    )


def rerun_identity(control: Control, inputs: ControlInputs) -> ControlSection:
    """Arms with identical settings, compared pairwise: byte-identical outputs and, for the rest,
    where they first diverge. `all_identical` is the determinism finding, not a pass/fail test."""
    skipped = _skipped(control, inputs)
    if skipped is not None:
        return skipped
    pairs, failures = [], []
    for a, b in combinations(control.arms, 2):
        contrast, problems = _identity(a, b, inputs)
        pairs.append(contrast)
        failures += problems
    identical = all(p.identical == p.n_common and not p.only_in_a and not p.only_in_b for p in pairs)
    return RerunSection(
        kind=control.kind,
        arms=list(control.arms),
        description=control.description,
        failures=failures,
        pairs=pairs,
        all_identical=identical,
    )


def setting_contrast(control: Control, inputs: ControlInputs) -> ControlSection:
    """Batch-size or backend contrast: per pair of arms, identity, first divergence and the paired
    test on the verdict rule's metric (the numbers that show whether the setting moves the score)."""
    skipped = _skipped(control, inputs)
    if skipped is not None:
        return skipped
    plan = inputs.plan
    pairs, failures = [], []
    for a, b in combinations(control.arms, 2):
        contrast, problems = _identity(a, b, inputs)
        settings = {
            arm: PairSettings(plan.arm(arm).backend, plan.arm(arm).batch_size, plan.arm(arm).dtype)
            for arm in (a, b)
        }
        pairs.append(ContrastPair(**fields_of(contrast), settings=settings, paired=_paired(a, b, inputs)))
        failures += problems
    return ContrastSection(
        kind=control.kind,
        arms=list(control.arms),
        description=control.description,
        failures=failures,
        pairs=pairs,
    )


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) + 0.0 if values else None


def _summary(entries: Sequence[SourcePair]) -> SourceSummary:
    shares = [e.discordant_share for e in entries if e.discordant_share is not None]
    diffs = [abs(e.difference_pct) for e in entries if e.difference_pct is not None]
    return SourceSummary(len(entries), _mean(shares), _mean(diffs))


def seed_vs_batch(control: Control, inputs: ControlInputs) -> ControlSection:
    """Sampling: variation between seeds at a fixed batch size against variation between batch sizes
    at a fixed seed, on the same prompts.

    Pairs of the control's arms that differ only in seed are "seed" pairs, those that differ only in
    batch size are "batch" pairs (pairs differing in both are not used). For each source: the mean
    share of discordant prompts (prompt-level pass differs) and the mean absolute difference of the
    verdict rule's metric; `larger` names the source with the larger discordant share.
    """
    skipped = _skipped(control, inputs)
    if skipped is not None:
        return skipped
    plan = inputs.plan
    sources: dict[str, list[SourcePair]] = {"seed": [], "batch": []}
    failures: list[str] = []
    for a, b in combinations(control.arms, 2):
        arm_a, arm_b = plan.arm(a), plan.arm(b)
        same_seed, same_batch = arm_a.seed == arm_b.seed, arm_a.batch_size == arm_b.batch_size
        if same_seed == same_batch:
            continue
        contrast, problems = _identity(a, b, inputs)
        failures += problems
        paired = _paired(a, b, inputs)
        n = paired.n_pairs
        entry = SourcePair(
            arms=[a, b],
            fixed={"batch_size": arm_a.batch_size} if same_batch else {"seed": arm_a.seed},
            n_pairs=n,
            identical=contrast.identical,
            discordant=paired.b + paired.c,
            discordant_share=round((paired.b + paired.c) / n, 4) + 0.0 if n else None,
            difference_pct=paired.difference.value_pct if paired.difference else None,
            paired=paired,
        )
        sources["seed" if same_batch else "batch"].append(entry)
    summary = {source: _summary(entries) for source, entries in sources.items()}
    seed_share, batch_share = summary["seed"].mean_discordant_share, summary["batch"].mean_discordant_share
    if seed_share is None or batch_share is None:
        larger = None
    else:
        larger = "seed" if seed_share > batch_share else "batch" if batch_share > seed_share else "equal"
    return SeedVsBatchSection(
        kind=control.kind,
        arms=list(control.arms),
        description=control.description,
        failures=failures,
        seed_pairs=sources["seed"],
        batch_pairs=sources["batch"],
        summary=summary,
        larger=larger,
        metric=plan.verdict.metric,
    )
