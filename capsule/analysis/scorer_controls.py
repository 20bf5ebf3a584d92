"""The scorer controls: stability of the unseeded official scorer, and sanity of the scorer itself.

The scorer is a parameter (`score_fn(rows, seed) -> score rows`, `band_fn(rows) -> dict`), so these
controls are tested with small stand-ins and run on the real `ifeval_scorer` by `capsule reproduce`.
Rows handed to the scorer are dicts with at least `key` and `response`.

Unseeded scoring is random by design, so `stability_runs` is a separate step: the caller runs it
once, writes the runs to files, and passes them back in; analysis.json is then a pure function of
files and re-derives byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from capsule.analysis.control_inputs import BandFn, ControlInputs, Rows, ScoreFn
from capsule.analysis.control_schema import (
    Band,
    CompliantCheck,
    ControlSection,
    EchoCheck,
    SanityCheck,
    SanitySection,
    SkippedCheck,
    SkippedControl,
    StabilityMetric,
    StabilitySection,
    Traced,
    UnstablePrompt,
)
from capsule.analysis.controls import refused_control
from capsule.analysis.fields import fields_of
from capsule.analysis.outcomes import READINGS, Outcomes, outcomes_from_scores, parts, value
from capsule.analysis.stats import percent
from capsule.errors import BadInputError
from capsule.jsonio import read_jsonl
from capsule.prereg.metrics import ALL_METRICS
from capsule.prereg.plan import Control
from ifeval_scorer import Prompt


def metric_values(outcomes: Outcomes) -> dict[str, float]:
    """Every metric (base and composite) of `outcomes`, in percent."""
    return {metric: percent(value(parts(outcomes, metric))) for metric in ALL_METRICS}


def plain(data: Any) -> Any:
    """`data` as plain JSON values: tuples become lists, keys strings, floats rounded to 6 digits."""
    if isinstance(data, Mapping):
        return {str(key): plain(item) for key, item in data.items()}
    if isinstance(data, (list, tuple)):
        return [plain(item) for item in data]
    if isinstance(data, float):
        return round(data, 6) + 0.0
    if hasattr(data, "item"):  # a NumPy scalar
        return plain(data.item())
    return data


def stability_runs(
    control: Control, generations: Mapping[str, Rows], score_fn: ScoreFn
) -> list[list[dict[str, Any]]]:
    """Score the control's arm `control.k` times unseeded (`seed=None`): the official scorer's spread.

    Nondeterministic on purpose; store the result and pass it to `scorer_stability`.
    """
    rows = generations[control.arms[0]]
    return [list(score_fn(rows, None)) for _ in range(control.k)]


def _unstable(runs: Sequence[Rows]) -> list[UnstablePrompt]:
    verdicts: dict[int, list[Mapping[str, Any]]] = {}
    for run in runs:
        for row in run:
            verdicts.setdefault(int(row["key"]), []).append(row)
    unstable = []
    for key in sorted(verdicts):
        rows = verdicts[key]
        ids = list(rows[0]["instruction_id_list"])
        varying = []
        for reading in READINGS:
            flags = [tuple(row[reading]["instructions"]) for row in rows]
            varying += [(reading, i) for i in range(len(ids)) if len({f[i] for f in flags}) > 1]
        if varying:
            unstable.append(
                UnstablePrompt(
                    key=key,
                    instructions=sorted({ids[i] for _, i in varying}),
                    readings=sorted({reading for reading, _ in varying}),
                )
            )
    return unstable


def scorer_stability(
    control: Control,
    generations: Mapping[str, Rows],
    outcomes: Mapping[str, Outcomes],
    runs: Sequence[Rows],
    band_fn: BandFn,
) -> StabilitySection:
    """Spread of each metric over k unseeded scorer runs, the prompts whose verdicts move (with the
    instruction responsible), the seeded value for reference and the exhaustive letter band."""
    arm = control.arms[0]
    values = [metric_values(outcomes_from_scores(run, f"stability run {i}")) for i, run in enumerate(runs)]
    seeded = metric_values(outcomes[arm]) if arm in outcomes else None
    metrics = {}
    for metric in ALL_METRICS:
        series = [v[metric] for v in values]
        low, high = (min(series), max(series)) if series else (None, None)
        metrics[metric] = StabilityMetric(
            min_pct=low,
            max_pct=high,
            spread_pct=None if low is None or high is None else round(high - low, 2) + 0.0,
            seeded_pct=seeded[metric] if seeded else None,
            values_pct=series,
        )
    return StabilitySection(
        kind=control.kind,
        arms=[arm],
        description=control.description,
        failures=[],
        k=len(runs),
        metrics=metrics,
        unstable_prompts=_unstable(runs),
        band=Band(plain(band_fn(generations[arm]))),
    )


def run_scorer_stability(control: Control, inputs: ControlInputs) -> ControlSection:
    """The scorer_stability runner: the stored unseeded runs (made here when none are stored, which
    makes the analysis no longer a pure function of the files); skipped without generations."""
    refused = refused_control(control, inputs)
    if refused is not None:
        return refused
    if not inputs.generations.get(control.arms[0]):
        return SkippedControl(
            kind=control.kind, arms=list(control.arms), skipped="no generations", failures=[]
        )
    if inputs.band_fn is None:
        raise BadInputError(f"control {control.name}: scorer_stability needs the scorer; pass band_fn=")
    runs = (inputs.stability or {}).get(control.name)
    if runs is None:
        runs = stability_runs(control, inputs.generations, _score_fn(control, inputs))
    return scorer_stability(control, inputs.generations, inputs.outcomes, runs, inputs.band_fn)


def _score_fn(control: Control, inputs: ControlInputs) -> ScoreFn:
    if inputs.score_fn is None:
        raise BadInputError(f"control {control.name}: {control.kind} needs the scorer; pass score_fn=")
    return inputs.score_fn


def _traced(rows: Rows, passed: bool) -> list[Traced]:
    """Each (key, instruction id) whose verdict equals `passed` in some reading, with those readings."""
    found = []
    for row in sorted(rows, key=lambda r: int(r["key"])):
        for index, instruction in enumerate(row["instruction_id_list"]):
            readings = [r for r in READINGS if bool(row[r]["instructions"][index]) == passed]
            if readings:
                found.append(Traced(key=int(row["key"]), instruction_id=instruction, readings=readings))
    return found


def _misaligned(rows: Rows, prompts: Mapping[int, Prompt], keys: Sequence[int]) -> list[int]:
    scored = {int(row["key"]): tuple(row["instruction_id_list"]) for row in rows}
    return [key for key in keys if scored.get(key) != prompts[key].instruction_id_list]


def load_compliant(path: Path) -> list[dict[str, Any]]:
    """Read hand-written compliant answers: JSONL rows with integer `key` and string `response`."""
    rows = []
    for number, row in read_jsonl(path, "compliant answers file"):
        if not (
            isinstance(row, dict)
            and isinstance(row.get("key"), int)
            and not isinstance(row["key"], bool)
            and isinstance(row.get("response"), str)
        ):
            raise BadInputError(f'{path}:{number}: expected {{"key": int, "response": str}}')
        rows.append({"key": row["key"], "response": row["response"]})
    return rows


def _check(
    name: str, rows: Rows, expected: float | None, prompts: Mapping[int, Prompt]
) -> tuple[SanityCheck, list[str]]:
    keys = sorted(int(row["key"]) for row in rows)
    outcomes = outcomes_from_scores(rows, f"sanity {name}")
    values = metric_values(outcomes)
    failures = []
    misaligned = _misaligned(rows, prompts, keys) if prompts else []
    if misaligned:
        failures.append(f"{name}: scored instructions differ from the prompt's own on keys {misaligned[:10]}")
    if list(outcomes.keys) != keys or len(rows) != len(set(keys)):
        failures.append(f"{name}: the scorer did not return one row per key asked")
    off = [m for m in ALL_METRICS if values[m] != expected]
    if expected is not None and off:
        failures.append(
            f"{name}: expected {expected}% on every metric, got " + ", ".join(f"{m} {values[m]}" for m in off)
        )
    return SanityCheck(n=len(keys), metrics_pct=values), failures


def scorer_sanity(
    control: Control,
    plan_dir: Path,
    generations: Mapping[str, Rows],
    score_fn: ScoreFn,
    seed: int,
    prompts: Mapping[int, Prompt] | None,
) -> SanitySection:
    """Three checks of the scorer, seeded with the plan's scorer seed, on the control arm's prompts:

    - empty responses must score 0 on every metric;
    - prompt echoes (the response is the prompt text) are reported with every pass traced to the
      prompt's own instruction (key, instruction id, readings): the scorer must score each echo
      against that prompt's own instruction list. Echoes are not near 0 in IFEval (prompts often
      satisfy their own constraints: keywords they name, a <<title>> they show, no commas), so the
      echo level is reported as a baseline, never as a pass threshold;
    - hand-written compliant answers (`control.compliant`, JSONL of key + response relative to the
      plan's directory) must score 100% on every metric.
    """
    if prompts is None:
        raise BadInputError(f"control {control.name}: scorer_sanity needs the prompts; pass prompts=")
    arm_rows = generations.get(control.arms[0], []) if control.arms else []
    keys = sorted({int(row["key"]) for row in arm_rows}) if control.arms else sorted(prompts)
    failures: list[str] = []
    empty_rows = score_fn([{"key": k, "response": ""} for k in keys], seed)
    empty, problems = _check("empty responses", empty_rows, 0.0, prompts)
    failures += problems
    echo_rows = score_fn([{"key": k, "response": prompts[k].prompt} for k in keys], seed)
    echoed, problems = _check("prompt echoes", echo_rows, None, prompts)
    echo = EchoCheck(**fields_of(echoed), passes=_traced(echo_rows, True))
    failures += problems
    compliant: CompliantCheck | SkippedCheck
    if control.compliant:
        compliant_rows = score_fn(load_compliant(plan_dir / control.compliant), seed)
        checked, problems = _check("compliant answers", compliant_rows, 100.0, prompts)
        compliant = CompliantCheck(**fields_of(checked), failing=_traced(compliant_rows, False))
        failures += problems
    else:
        compliant = SkippedCheck(skipped="no compliant answers declared")
    return SanitySection(
        kind=control.kind,
        arms=list(control.arms),
        description=control.description,
        failures=failures,
        empty=empty,
        echo=echo,
        compliant=compliant,
        passed=not failures,
    )


def run_scorer_sanity(control: Control, inputs: ControlInputs) -> ControlSection:
    """The scorer_sanity runner: `scorer_sanity` with the plan's scorer seed; skipped when the
    control names an arm that has no generations."""
    refused = refused_control(control, inputs)
    if refused is not None:
        return refused
    if control.arms and not inputs.generations.get(control.arms[0]):
        return SkippedControl(
            kind=control.kind, arms=list(control.arms), skipped="no generations", failures=[]
        )
    plan = inputs.plan
    score_fn = _score_fn(control, inputs)
    return scorer_sanity(
        control, plan.path.parent, inputs.generations, score_fn, plan.scorer_seed, inputs.prompts
    )
