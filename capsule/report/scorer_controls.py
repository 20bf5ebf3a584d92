"""The scorer controls in RESULTS.md: scorer stability with its letter band, and scorer sanity.

Renders the sections `capsule.analysis.scorer_controls` writes (`capsule.analysis.control_schema`);
each renderer is named by its kind's row in `capsule.prereg.control_kinds`. `scorer_echo` gives the
prompt-echo baseline the headline and the arms plot compare the claim with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from capsule.analysis.control_schema import (
    Band,
    ControlSection,
    SanitySection,
    SkippedCheck,
    StabilitySection,
    Traced,
)
from capsule.analysis.schema import Analysis
from capsule.report.formatting import DASH, METRIC_LABELS, fmt_pct, in_metric_order, plural

UNSTABLE_SHOWN = 10
ECHO_TOP = 3


def scorer_echo(analysis: Analysis, metric: str) -> tuple[float, int] | None:
    """(value in percent, prompts) of the prompt-echo baseline on `metric`, from the first
    scorer-sanity control that has one; None when the plan has no such control."""
    for control in analysis.controls.values():
        if isinstance(control, SanitySection) and metric in control.echo.metrics_pct:
            return control.echo.metrics_pct[metric], control.echo.n
    return None


def _band_cell(band: Band, metric: str) -> str:
    entry = band.metrics.get(metric)
    if not entry:
        return DASH
    return f"[{fmt_pct(round(entry.low * 100, 2))}, {fmt_pct(round(entry.high * 100, 2))}]"


def render_stability(control: ControlSection, analysis: Analysis) -> list[str]:
    """A scorer_stability section: the spread per metric, the letter band, the unstable prompts."""
    assert isinstance(control, StabilitySection)
    arm, k = control.arms[0], control.k
    unstable = control.unstable_prompts
    band = control.band
    lines = [
        f"Arm `{arm}` scored {plural(k, 'time')} unseeded, as the official scorer runs "
        f"(random letter draws): {plural(len(unstable), 'prompt')} changed verdict between runs.",
        "",
        "| metric | seeded | unseeded min | unseeded max | spread | letter band |",
        "|---|---|---|---|---|---|",
    ]
    metrics = control.metrics
    for metric in in_metric_order(metrics):
        entry = metrics[metric]
        lines.append(
            f"| {METRIC_LABELS.get(metric, metric)} | {fmt_pct(entry.seeded_pct)} | "
            f"{fmt_pct(entry.min_pct)} | {fmt_pct(entry.max_pct)} | "
            f"{fmt_pct(entry.spread_pct)} | {_band_cell(band, metric)} |"
        )
    keys = band.ambiguous_keys
    lines.append("")
    if keys:
        lines.append(
            f"Letter band: every possible letter evaluated for the {plural(len(keys), 'prompt')} that "
            f"draw one (keys {', '.join(map(str, keys))}); a faithful unseeded run can report any "
            "value in the band."
        )
    else:
        lines.append(
            "Letter band: no prompt of this arm draws a random letter, so the band is a single point."
        )
    if unstable:
        lines += [
            "",
            "Prompts whose verdict changed between the unseeded runs, with the instructions responsible:",
        ]
    for prompt in unstable[:UNSTABLE_SHOWN]:
        lines.append(f"- key {prompt.key}: {', '.join(prompt.instructions)} ({', '.join(prompt.readings)})")
    if len(unstable) > UNSTABLE_SHOWN:
        lines.append(f"- and {len(unstable) - UNSTABLE_SHOWN} more (analysis.json)")
    return lines


def _every(metrics: Mapping[str, float], expected: float) -> str:
    off = {m: v for m, v in metrics.items() if v != expected}
    if not off:
        return f"{fmt_pct(expected)} on every metric"
    return ", ".join(f"{METRIC_LABELS.get(m, m)} {fmt_pct(metrics[m])}" for m in in_metric_order(metrics))


def _failing(failing: list[Traced]) -> str:
    return ", ".join(f"key {f.key} `{f.instruction_id}`" for f in failing[:UNSTABLE_SHOWN])


def render_sanity(control: ControlSection, analysis: Analysis) -> list[str]:
    """A scorer_sanity section: empty answers, prompt echoes (a baseline), compliant answers."""
    assert isinstance(control, SanitySection)
    empty, echo, compliant = control.empty, control.echo, control.compliant
    ok = all(v == 0.0 for v in empty.metrics_pct.values())
    lines = [
        f"- Empty responses ({empty.n}): {_every(empty.metrics_pct, 0.0)} "
        f"(must be 0): {'passed' if ok else 'FAILED'}."
    ]
    metrics = echo.metrics_pct
    shown = ", ".join(f"{METRIC_LABELS.get(m, m)} {fmt_pct(metrics[m])}" for m in in_metric_order(metrics))
    counts = Counter(p.instruction_id for p in echo.passes)
    top = ", ".join(f"`{i}` {c}" for i, c in sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:ECHO_TOP])
    lines.append(
        f"- Prompt echoes ({echo.n}, the prompt text as the answer): {shown}. "
        f"{plural(sum(counts.values()), 'instruction pass', 'instruction passes')}, "
        "each scored against the prompt's own "
        f"instructions"
        + (f"; most often {top}" if top else "")
        + ". A baseline any model must beat, not a pass threshold."
    )
    if isinstance(compliant, SkippedCheck):
        lines.append(f"- Compliant answers: skipped ({compliant.skipped}).")
    else:
        failing = compliant.failing
        ok = not failing and all(v == 100.0 for v in compliant.metrics_pct.values())
        lines.append(
            f"- Hand-written compliant answers ({compliant.n}): {_every(compliant.metrics_pct, 100.0)} "
            f"(must be 100): {'passed' if ok else 'FAILED'}"
            + (f"; failing: {_failing(failing)}" if failing else "")
            + "."
        )
    return lines
