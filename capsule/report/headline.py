"""The headline and summary blocks of RESULTS.md: the claim, the verdict and why, the echo floor.

Numbers come from the analysis's readings only (`capsule.analysis.schema.Reading`) and are
formatted by `capsule.report.formatting`, so `capsule check-numbers` can re-render them.
"""

from __future__ import annotations

from capsule.analysis.schema import Analysis, Reading
from capsule.artifacts.stand_in import is_stand_in, substitution_note
from capsule.machine.manifest_record import ManifestRecord
from capsule.prereg.backend_specs import FAKE_BACKEND
from capsule.report.formatting import METRIC_MEANING, fmt_interval, fmt_pct, plural
from capsule.report.report_input import ReportInput
from capsule.report.scorer_controls import scorer_echo


def _verdict_clause(reading: Reading) -> str:
    """Why the verdict is what it is, in words (numbers from the reading only)."""
    claim = fmt_pct(reading.claim_pct)
    interval = reading.interval
    if reading.not_run is not None:
        return f"arm `{reading.arm}` was {reading.not_run.replace('not run: ', 'not run, ', 1)}."
    if reading.value_pct is None or interval is None:
        return f"arm `{reading.arm}` has no scored prompts yet."
    where = (
        f"On arm `{reading.arm}` ({plural(reading.n, 'prompt')}), `{reading.metric}` is "
        f"{fmt_pct(reading.value_pct)}, {interval.confidence:.0%} {interval.kind} interval "
        f"{fmt_interval(interval)}"
    )
    if reading.verdict == "UNDERPOWERED":
        return f"{where}; fewer prompts than the {reading.min_n} the plan requires for a verdict."
    relation = "contains" if reading.verdict == "REPRODUCED" else "excludes"
    flips = reading.flips_to_reverse
    tail = (
        ""
        if flips is None
        else f" Changing {plural(flips, 'prompt')} between pass and fail would reverse it."
    )
    return f"{where}, which {relation} the claimed {claim}.{tail}"


def headline_line(reading: Reading) -> str:
    """One reading of the claim in one line, as the CLI prints it."""
    if reading.not_run is not None:
        return f"{reading.metric} on {reading.arm}: {reading.verdict}: {reading.not_run}"
    flips = reading.flips_to_reverse
    tail = "" if flips is None else f" ({plural(flips, 'prompt flip')} would reverse it)"
    return (
        f"{reading.metric} on {reading.arm}: {fmt_pct(reading.value_pct)} "
        f"{fmt_interval(reading.interval)} vs claim {fmt_pct(reading.claim_pct)}: "
        f"{reading.verdict}{tail}"
    )


def _failed_lines(analysis: Analysis) -> list[str]:
    failed = analysis.failed_controls
    if not failed:
        return []
    lines = [f"**FAILED CONTROLS: {', '.join(failed)}.** Read every number below with that in mind.", ""]
    for name in failed:
        control = analysis.controls.get(name)
        for failure in control.failures if control is not None else []:
            lines.append(f"- `{name}`: {failure}")
    return lines + [""]


def fake_data_note(
    analysis: Analysis, manifest: ManifestRecord | None, probe_note: str | None = None
) -> str | None:
    """One paragraph, or None. A dry run (its manifest records `model: null`: every arm ran on the
    fake backend, whatever backend the plan names) says that its verdicts are of fake data and that it
    is not in the ledger; a rehearsal (its manifest's model is a stand-in) says its verdicts are of
    noise; a probe says what it ran (`probe_note`, bolded); a run with arms that a plan put on the fake
    backend names them."""
    model = manifest.model.record if manifest is not None and manifest.model is not None else None
    if is_stand_in(model):
        substituted = substitution_note(model)
        return (
            "**REHEARSAL: STAND-IN MODEL.** Every arm ran on its real backend with a stand-in model of the "
            "plan's architecture class (random weights, shrunk config), on a few prompts and tokens per "
            "arm (rehearsal.json says which, and what else was substituted): every verdict below is of "
            "noise, not of the model. A rehearsal is not recorded in the ledger."
            + (f" {substituted}" if substituted else "")
        )
    if probe_note:
        return f"**{probe_note}** probe.json holds the step times it measured and the full study's cost."
    if manifest is not None and manifest.model_is_null:
        return (
            "**DRY RUN: FAKE DATA.** Every arm ran on the fake backend, with no model: the responses are "
            "random tokens, so every verdict below is of fake data, not of the model. A dry run is not "
            "recorded in the ledger, and `capsule verify` refuses it."
        )
    fake = [name for name, arm in analysis.arms.items() if arm.settings.backend == FAKE_BACKEND]
    if not fake:
        return None
    return (
        f"**FAKE DATA:** {len(fake)} of {len(analysis.arms)} arms ({', '.join(fake)}) ran on the fake "
        "backend: their responses are random tokens, so their verdicts are of fake data, not of the model."
    )


def _model_line(manifest: ManifestRecord | None) -> list[str]:
    model = manifest.model if manifest is not None else None
    if model is None:
        return ["**Model:** not recorded in the manifest (a dry run, or no model directory)."]
    note = f"; {model.note}" if model.note else ""
    digest = model.tree_digest[:16]
    return [
        f"**Model:** {model.name}"
        + (f" ({model.origin}{note})" if model.origin or note else "")
        + (f", weights tree digest `{digest}…`" if digest else "")
        + "."
    ]


def headline_block(data: ReportInput) -> list[str]:
    """The claim, the metric as the plan reads it, the primary reading's value, interval, verdict
    and flips to reverse it; the prompt-echo baseline; then every reading in one table."""
    analysis = data.analysis
    claim = analysis.claim
    readings = analysis.headline.readings
    primary = readings[0]
    metric = claim.metric
    fake = fake_data_note(analysis, data.manifest, data.probe_note)
    lines = ([fake, ""] if fake else []) + _failed_lines(analysis)
    lines += [
        f"**Claim:** {claim.text} ({claim.source}): {fmt_pct(claim.value_pct)}, "
        f"read by the plan as `{metric}` ({METRIC_MEANING.get(metric, metric)}).",
        "",
        f"**Verdict: {primary.verdict}.** {_verdict_clause(primary)}",
        "",
    ]
    echo = scorer_echo(analysis, metric)
    if echo is not None:
        value, n = echo
        relation = "above" if value > claim.value_pct else "at or below"
        lines += [
            f"**Baseline:** echoing each prompt back as the answer scores {fmt_pct(value)} `{metric}` "
            f"on the same scorer ({plural(n, 'prompt')}, scorer-sanity control), {relation} the claimed "
            f"{fmt_pct(claim.value_pct)}: IFEval prompts often satisfy their own constraints, so "
            "read the claim against that floor, not against 0.",
            "",
        ]
    lines += _model_line(data.manifest) + [""]
    lines += [
        "| reading | arm | n | value | interval | verdict | flips to reverse |",
        "|---|---|---|---|---|---|---|",
    ]
    for reading in readings:
        interval = reading.interval
        kind = f" {interval.kind} {interval.confidence:.0%}" if interval else ""
        flips = reading.flips_to_reverse
        lines.append(
            f"| `{reading.metric}` | {reading.arm} | {reading.n} | "
            f"{fmt_pct(reading.value_pct)} | "
            f"{fmt_interval(interval)}{kind} | **{reading.verdict}** | {'—' if flips is None else flips} |"
        )
    return lines


def summary_block(data: ReportInput) -> list[str]:
    """A short paragraph for a README: claim, verdict with value and interval, the echo floor."""
    analysis = data.analysis
    claim, primary = analysis.claim, analysis.headline.readings[0]
    failed = analysis.failed_controls
    text = f"Claim {fmt_pct(claim.value_pct)} `{claim.metric}`: **{primary.verdict}**. " + _verdict_clause(
        primary
    )
    echo = scorer_echo(analysis, claim.metric)
    if echo is not None:
        text += f" Echoing the prompt back scores {fmt_pct(echo[0])} on the same metric."
    if failed:
        text = f"**FAILED CONTROLS: {', '.join(failed)}.** " + text
    fake = fake_data_note(analysis, data.manifest, data.probe_note)
    return [f"{fake} {text}" if fake else text]
