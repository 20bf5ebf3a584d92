"""The named blocks of RESULTS.md: headline, summary, arms, comparisons, controls, machine.

Each block is a pure function of a run's analysis.json and manifest.json (`ReportInput`) to
Markdown lines, with every number formatted by `capsule.report.formatting`. `capsule check-numbers`
re-renders a block by its name (`BLOCKS`) and compares it number by number with the Markdown
that quotes it; `capsule.report.document` assembles RESULTS.md from the same blocks. This module
holds the tables (arms, comparisons) and the registry; the headline and summary live in
`capsule.report.headline`, the machine in `capsule.report.machine`, the controls in
`capsule.report.controls`.
"""

from __future__ import annotations

from collections.abc import Callable

from capsule.analysis.schema import ArmSection
from capsule.errors import BadInputError
from capsule.report.batch_finding import batch_finding_block
from capsule.report.controls import control_lines, in_control_order
from capsule.report.formatting import (
    METRIC_LABELS,
    fmt_count,
    fmt_interval,
    fmt_num,
    fmt_p,
    fmt_pct,
    fmt_share,
)
from capsule.report.headline import headline_block, summary_block
from capsule.report.machine import machine_block
from capsule.report.report_input import ReportInput

INTERVAL_NAMES = {"wilson": "Wilson", "clopper_pearson": "Clopper-Pearson", "bootstrap": "bootstrap"}
BASE_METRICS = (
    "prompt_level_strict_acc",
    "inst_level_strict_acc",
    "prompt_level_loose_acc",
    "inst_level_loose_acc",
)


def _metric_cell(arm: ArmSection, metric: str, kind: str) -> str:
    section = arm.metrics.get(metric)
    if not section:
        return "—"
    counts = section.counts.get(metric)
    count = f" ({fmt_count(counts.passed, counts.total)})" if counts else ""
    return f"{fmt_pct(section.value_pct)}{count} {fmt_interval(section.interval(metric, kind))}"


def _settings_row(name: str, arm: ArmSection, label: str) -> str:
    s, closure, trunc, tokens = arm.settings, arm.closure, arm.truncation, arm.tokens
    n = f"{arm.n}" + (f"/{arm.n_planned}" if arm.n_planned is not None else "")
    if arm.refused is not None:
        n += " (refused)"
    elif arm.partial:
        n += " (partial)"
    total = closure.closed + closure.unclosed
    closed = "n/a" if total == 0 else f"{fmt_count(closure.closed, total)}"
    truncated = f"{trunc.truncated} ({fmt_share(trunc.truncated_pct)})"
    return (
        f"| {label} | {s.backend} | {s.dtype} | {s.batch_size} | {s.decoding} | "
        f"{s.seed} | "
        f"{s.max_new_tokens} | {n} | {closed} | {truncated} | {fmt_num(tokens.median)} | "
        f"{fmt_num(tokens.tokens_per_s, 1)} |"
    )


def arms_block(data: ReportInput) -> list[str]:
    """Two tables keyed by arm: settings with output statistics, and the scores with counts and intervals."""
    analysis = data.analysis
    rule = analysis.verdict_rule
    kind = rule.interval
    lines = [
        "| arm | backend | dtype | batch | decoding | seed | max tokens | n | thinking closed | truncated | "
        "median tokens | tokens/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    labels = {name: f"**{name}**" if name == rule.arm else name for name in analysis.arms}
    for name, arm in analysis.arms.items():
        lines.append(_settings_row(name, arm, labels[name]))
    claim_metric = analysis.claim.metric
    metrics: list[str] = list(BASE_METRICS) + ([claim_metric] if claim_metric not in BASE_METRICS else [])
    lines += [
        "",
        "| arm | " + " | ".join(METRIC_LABELS.get(m, m) for m in metrics) + " |",
        "|---" * (len(metrics) + 1) + "|",
    ]
    for name, arm in analysis.arms.items():
        lines.append(f"| {labels[name]} | " + " | ".join(_metric_cell(arm, m, kind) for m in metrics) + " |")
    boot = f"cluster bootstrap ({rule.bootstrap_resamples} resamples, seed {rule.bootstrap_seed})"
    which = (
        f"{boot} for every metric"
        if kind == "bootstrap"
        else f"{INTERVAL_NAMES.get(kind, kind)} for prompt-level metrics, {boot} for instruction-level "
        "metrics and averages"
    )
    lines += [
        "",
        f"Scores in percent, (passed/total), then the {rule.confidence:.0%} interval: {which}. "
        "Bold: the verdict arm. "
        "Truncated: responses that hit the token cap. Tokens/s is generation throughput (no model load) "
        "on the machine below.",
    ]
    refused = {name: arm.refused for name, arm in analysis.arms.items() if arm.refused is not None}
    if refused:
        lines += ["", "Refused at load (the backend does not run these settings), in the engine's words:"]
        lines += [f"- `{name}`: {message}" for name, message in refused.items()]
    return lines


def comparisons_block(data: ReportInput) -> list[str]:
    """The plan's paired comparisons: discordant counts b and c, exact McNemar p, the difference
    with its interval, the verdict; then each distinct decision rule in words."""
    comparisons = data.analysis.comparisons
    if not comparisons:
        return ["The plan declares no paired comparisons."]
    lines = [
        "| comparison | a vs b | metric | pairs | b | c | p | difference a − b | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rules: list[str] = []
    not_run: list[str] = []
    for name, comp in comparisons.items():
        if comp.not_run is not None:
            lines.append(
                f"| {name} | {comp.arms[0]} vs {comp.arms[1]} | `{comp.metric}` | — | — | — | — | — | "
                f"{comp.verdict.upper()} |"
            )
            not_run.append(f"{name}: {comp.not_run}.")
            continue
        difference = comp.difference
        diff = (
            "—"
            if difference is None
            else f"{fmt_pct(difference.value_pct)} {fmt_interval(difference.interval)}"
        )
        lines.append(
            f"| {name} | {comp.arms[0]} vs {comp.arms[1]} | `{comp.metric}` | "
            f"{comp.n_pairs} | "
            f"{comp.b} | {comp.c} | {fmt_p(comp.p_value)} | {diff} | {comp.verdict.upper()} |"
        )
        if comp.rule and comp.rule not in rules:
            rules.append(comp.rule)
    lines += [
        "",
        "b: prompts passing in a but not in b; c: the reverse (prompt-level pass of the metric's "
        "reading). p: exact McNemar on b and c. Difference in points with its paired bootstrap interval.",
    ]
    lines += [f"Rule: {rule}." for rule in rules]
    return lines + (["", *not_run] if not_run else [])


def controls_block(data: ReportInput) -> list[str]:
    """Every control of the plan in sentences and small tables (see `capsule.report.controls`)."""
    lines: list[str] = []
    controls = data.analysis.controls
    for name in in_control_order(controls):
        lines += control_lines(name, controls[name], data.analysis) + [""]
    return lines[:-1] if lines else ["The plan declares no controls."]


Block = Callable[[ReportInput], list[str]]

#: Block name -> renderer. Names are what `block=` in a `capsule:numbers` marker may say.
BLOCKS: dict[str, Block] = {
    "summary": summary_block,
    "headline": headline_block,
    "batch_finding": batch_finding_block,
    "arms": arms_block,
    "comparisons": comparisons_block,
    "controls": controls_block,
    "machine": machine_block,
}


def render_block(name: str, data: ReportInput) -> str:
    """The text of block `name` (no trailing newline); BadInputError for an unknown name."""
    renderer = BLOCKS.get(name)
    if renderer is None:
        raise BadInputError(f"unknown report block {name!r}; known blocks: {', '.join(BLOCKS)}")
    return "\n".join(renderer(data)).rstrip("\n")
