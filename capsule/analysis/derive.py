"""Apply a sealed plan's comparisons, controls and verdict rule to generation and score rows.

`analyse` is a pure function of its inputs: the same files give the same `Analysis`
(`capsule.analysis.schema`), and `capsule.analysis.codec.write_analysis` the same bytes.
Percentages are stored to 2 decimals, p-values
to 4 significant digits, and every bootstrap draws from `default_rng(bootstrap_seed)`. Partial arms
are analysed on the prompts they have; comparisons use the keys both arms scored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from capsule.analysis.control_inputs import BandFn, ControlInputs, Rows, ScoreFn
from capsule.analysis.control_schema import ControlSection, SkippedControl
from capsule.analysis.divergence import Tokenize
from capsule.analysis.fields import fields_of
from capsule.analysis.outcomes import Outcomes, outcomes_from_scores
from capsule.analysis.paired import paired_comparison
from capsule.analysis.readings import arm_section, reading_section
from capsule.analysis.schema import SCHEMA, Analysis, ClaimInfo, ComparisonSection, Headline, PlanInfo
from capsule.analysis.stats import NOT_RUN
from capsule.generation.refused_arms import not_run_text
from capsule.prereg.control_kinds import control_kind, resolve
from capsule.prereg.plan import Control, Plan
from capsule.run_dir import RunDir
from ifeval_scorer import Prompt


def run_control(control: Control, inputs: ControlInputs) -> ControlSection:
    """One control's section, from the runner its kind names in `capsule.prereg.control_kinds`."""
    section: ControlSection = resolve(control_kind(control.kind).runner)(control, inputs)
    return section


def _comparisons(
    plan: Plan, outcomes: Mapping[str, Outcomes], refused: Mapping[str, str]
) -> dict[str, ComparisonSection]:
    rule = plan.verdict
    found = {}
    for c in plan.comparisons:
        needs = {arm: refused[arm] for arm in c.arms if arm in refused}
        paired = paired_comparison(
            c.arms,
            outcomes.get(c.arms[0]),
            outcomes.get(c.arms[1]),
            c.metric,
            c.confidence,
            min_pairs=rule.min_pairs,
            resamples=rule.bootstrap_resamples,
            seed=rule.bootstrap_seed,
        )
        if needs:  # the paired test ran on nothing: say why, and give no verdict
            fields = {**fields_of(paired), "verdict": NOT_RUN}
            found[c.name] = ComparisonSection(
                **fields, description=c.description, not_run=not_run_text(needs)
            )
            continue
        found[c.name] = ComparisonSection(**fields_of(paired), description=c.description)
    return found


def analyse(
    plan: Plan,
    generations: Mapping[str, Rows],
    scores: Mapping[str, Rows],
    *,
    score_fn: ScoreFn,
    band_fn: BandFn,
    tokenize: Tokenize | None = None,
    prompts: Mapping[int, Prompt] | None = None,
    stability_scores: Mapping[str, Sequence[Rows]] | None = None,
    refused: Mapping[str, str] | None = None,
) -> Analysis:
    """The analysis: per arm, per comparison, per control, the headline and failed controls.

    `generations` and `scores` map arm name -> rows (missing or empty arms are allowed: their
    sections say so). `score_fn(rows, seed)` and `band_fn(rows)` are the scorer, used by the scorer
    controls; `stability_scores` maps a scorer_stability control's name to its stored unseeded runs
    (from `capsule.analysis.scorer_controls.stability_runs`); without it the runs are made here, and the
    result is then no longer a pure function of the files. `tokenize` counts first-divergence
    indices in model tokens (default: characters). `prompts` is needed by scorer_sanity and to
    know how many prompts an "all" subset plans. `refused` maps each arm its backend refused at load
    to the engine's message: every control, comparison and reading that needs one says
    "not run: refused (...)" (`capsule.generation.refused_arms`).
    """
    refused = dict(refused or {})
    outcomes = {
        arm: outcomes_from_scores(rows, RunDir(Path()).scores(arm).as_posix())
        for arm, rows in scores.items()
        if rows
    }
    rule = plan.verdict
    arms = {
        arm.name: arm_section(
            plan, arm, generations.get(arm.name, []), outcomes.get(arm.name), prompts, refused.get(arm.name)
        )
        for arm in plan.arms
    }
    inputs = ControlInputs(
        plan=plan,
        generations=generations,
        outcomes=outcomes,
        tokenize=tokenize,
        score_fn=score_fn,
        band_fn=band_fn,
        prompts=prompts,
        stability=stability_scores,
        refused=refused,
    )
    controls = {control.name: run_control(control, inputs) for control in plan.controls}
    failed = [name for name, section in controls.items() if section.failures]
    metrics = list(dict.fromkeys((plan.claim.metric, *plan.claim.other_readings)))
    not_run = not_run_text({rule.arm: refused[rule.arm]}) if rule.arm in refused else None
    readings = [reading_section(plan, metric, outcomes.get(rule.arm), not_run) for metric in metrics]
    claim = plan.claim
    return Analysis(
        schema=SCHEMA,
        plan=PlanInfo(plan.name, plan.scorer_seed),
        claim=ClaimInfo(claim.text, claim.value, claim.metric, list(claim.other_readings), claim.source),
        verdict_rule=rule,
        arms=arms,
        comparisons=_comparisons(plan, outcomes, refused),
        controls=controls,
        headline=Headline(readings[0].verdict, readings, bool(failed)),
        failed_controls=sorted(failed),
        skipped_controls=sorted(n for n, s in controls.items() if isinstance(s, SkippedControl)),
        refused_arms=refused or None,
    )
