"""The named blocks of RESULTS.md: headline, summary, arms, comparisons, controls, machine.

Each block is a pure function of a run's analysis.json and manifest.json (`ReportInput`) to
Markdown lines, with every number formatted by `capsule.report.formatting`. `capsule check-numbers`
re-renders a block by its name (`BLOCKS`) and compares it number by number with the Markdown
that quotes it; `capsule.report.document` assembles RESULTS.md from the same blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from capsule.errors import BadInputError
from capsule.report.controls import control_lines, in_control_order, scorer_echo
from capsule.report.formatting import (
    METRIC_LABELS,
    METRIC_MEANING,
    fmt_count,
    fmt_interval,
    fmt_num,
    fmt_p,
    fmt_pct,
    fmt_share,
    plural,
)

INTERVAL_NAMES = {"wilson": "Wilson", "clopper_pearson": "Clopper-Pearson", "bootstrap": "bootstrap"}
BASE_METRICS = (
    "prompt_level_strict_acc",
    "inst_level_strict_acc",
    "prompt_level_loose_acc",
    "inst_level_loose_acc",
)


@dataclass(frozen=True)
class ReportInput:
    """What a block renders from: the analysis dict, the manifest dict (or None) and the plots
    that exist for the run (file names relative to the run directory)."""

    analysis: Mapping[str, Any]
    manifest: Mapping[str, Any] | None = None
    plots: tuple[str, ...] = field(default_factory=tuple)


def _verdict_clause(reading: Mapping[str, Any]) -> str:
    """Why the verdict is what it is, in words (numbers from the reading only)."""
    claim = fmt_pct(reading["claim_pct"])
    if reading.get("value_pct") is None:
        return f"arm `{reading['arm']}` has no scored prompts yet."
    interval = reading["interval"]
    where = (
        f"On arm `{reading['arm']}` ({plural(reading['n'], 'prompt')}), `{reading['metric']}` is "
        f"{fmt_pct(reading['value_pct'])}, {interval['confidence']:.0%} {interval['kind']} interval "
        f"{fmt_interval(interval)}"
    )
    verdict = reading["verdict"]
    if verdict == "UNDERPOWERED":
        return f"{where}; fewer prompts than the {reading['min_n']} the plan requires for a verdict."
    relation = "contains" if verdict == "REPRODUCED" else "excludes"
    flips = reading.get("flips_to_reverse")
    tail = (
        ""
        if flips is None
        else f" Changing {plural(flips, 'prompt')} between pass and fail would reverse it."
    )
    return f"{where}, which {relation} the claimed {claim}.{tail}"


def headline_line(reading: Mapping[str, Any]) -> str:
    """One reading of the claim in one line, as the CLI prints it."""
    flips = reading.get("flips_to_reverse")
    tail = "" if flips is None else f" ({plural(flips, 'prompt flip')} would reverse it)"
    return (
        f"{reading['metric']} on {reading['arm']}: {fmt_pct(reading['value_pct'])} "
        f"{fmt_interval(reading.get('interval'))} vs claim {fmt_pct(reading['claim_pct'])}: "
        f"{reading['verdict']}{tail}"
    )


def _failed_lines(analysis: Mapping[str, Any]) -> list[str]:
    failed = list(analysis.get("failed_controls") or [])
    if not failed:
        return []
    lines = [f"**FAILED CONTROLS: {', '.join(failed)}.** Read every number below with that in mind.", ""]
    for name in failed:
        for failure in analysis["controls"].get(name, {}).get("failures", []):
            lines.append(f"- `{name}`: {failure}")
    return lines + [""]


def _model_line(manifest: Mapping[str, Any] | None) -> list[str]:
    model = (manifest or {}).get("model")
    if not model:
        return ["**Model:** not recorded in the manifest (a dry run, or no model directory)."]
    source = model.get("source") or {}
    origin = ", ".join(str(source[k]) for k in ("requirement", "member") if source.get(k))
    note = f"; {source['note']}" if source.get("note") else ""
    digest = str(model.get("tree_digest") or "")[:16]
    return [
        f"**Model:** {model.get('name', '?')}"
        + (f" ({origin}{note})" if origin or note else "")
        + (f", weights tree digest `{digest}…`" if digest else "")
        + "."
    ]


def headline_block(data: ReportInput) -> list[str]:
    """The claim, the metric as the plan reads it, the primary reading's value, interval, verdict
    and flips to reverse it; the prompt-echo baseline; then every reading in one table."""
    analysis = data.analysis
    claim = analysis["claim"]
    readings = analysis["headline"]["readings"]
    primary = readings[0]
    metric = claim["metric"]
    lines = _failed_lines(analysis)
    lines += [
        f"**Claim:** {claim['text']} ({claim.get('source', 'no source')}): {fmt_pct(claim['value_pct'])}, "
        f"read by the plan as `{metric}` ({METRIC_MEANING.get(metric, metric)}).",
        "",
        f"**Verdict: {primary['verdict']}.** {_verdict_clause(primary)}",
        "",
    ]
    echo = scorer_echo(analysis, metric)
    if echo is not None:
        value, n = echo
        relation = "above" if value > claim["value_pct"] else "at or below"
        lines += [
            f"**Baseline:** echoing each prompt back as the answer scores {fmt_pct(value)} `{metric}` "
            f"on the same scorer ({plural(n, 'prompt')}, scorer-sanity control), {relation} the claimed "
            f"{fmt_pct(claim['value_pct'])}: IFEval prompts often satisfy their own constraints, so "
            "read the claim against that floor, not against 0.",
            "",
        ]
    lines += _model_line(data.manifest) + [""]
    lines += [
        "| reading | arm | n | value | interval | verdict | flips to reverse |",
        "|---|---|---|---|---|---|---|",
    ]
    for reading in readings:
        interval = reading.get("interval")
        kind = f" {interval['kind']} {interval['confidence']:.0%}" if interval else ""
        flips = reading.get("flips_to_reverse")
        lines.append(
            f"| `{reading['metric']}` | {reading['arm']} | {reading['n']} | "
            f"{fmt_pct(reading['value_pct'])} | "
            f"{fmt_interval(interval)}{kind} | **{reading['verdict']}** | {'—' if flips is None else flips} |"
        )
    return lines


def summary_block(data: ReportInput) -> list[str]:
    """A short paragraph for a README: claim, verdict with value and interval, the echo floor."""
    analysis = data.analysis
    claim, primary = analysis["claim"], analysis["headline"]["readings"][0]
    failed = analysis.get("failed_controls") or []
    text = (
        f"Claim {fmt_pct(claim['value_pct'])} `{claim['metric']}`: **{primary['verdict']}**. "
        + _verdict_clause(primary)
    )
    echo = scorer_echo(analysis, claim["metric"])
    if echo is not None:
        text += f" Echoing the prompt back scores {fmt_pct(echo[0])} on the same metric."
    if failed:
        text = f"**FAILED CONTROLS: {', '.join(failed)}.** " + text
    return [text]


def _interval_for(section: Mapping[str, Any], metric: str, kind: str) -> Mapping[str, Any] | None:
    intervals = section.get("intervals", {})
    return (
        intervals.get(kind)
        if metric.startswith("prompt_level") and kind in intervals
        else intervals.get("bootstrap")
    )


def _metric_cell(arm: Mapping[str, Any], metric: str, kind: str) -> str:
    section = arm.get("metrics", {}).get(metric)
    if not section:
        return "—"
    counts = section.get("counts", {}).get(metric)
    count = f" ({fmt_count(counts['passed'], counts['total'])})" if counts else ""
    return f"{fmt_pct(section['value_pct'])}{count} {fmt_interval(_interval_for(section, metric, kind))}"


def arms_block(data: ReportInput) -> list[str]:
    """Two tables keyed by arm: settings with output statistics, and the scores with counts and intervals."""
    analysis = data.analysis
    rule = analysis.get("verdict_rule", {})
    kind = rule.get("interval", "wilson")
    primary_arm = rule.get("arm")
    lines = [
        "| arm | backend | dtype | batch | decoding | seed | max tokens | n | thinking closed | truncated | "
        "median tokens | tokens/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, arm in analysis["arms"].items():
        s, closure, trunc, tokens = (
            arm["settings"],
            arm.get("closure", {}),
            arm.get("truncation", {}),
            arm.get("tokens") or {},
        )
        n = f"{arm['n']}" + (f"/{arm['n_planned']}" if arm.get("n_planned") is not None else "")
        if arm.get("partial"):
            n += " (partial)"
        total = closure.get("closed", 0) + closure.get("unclosed", 0)
        closed = "n/a" if total == 0 else f"{fmt_count(closure['closed'], total)}"
        truncated = f"{trunc.get('truncated', 0)} ({fmt_share(trunc.get('truncated_pct'))})"
        label = f"**{name}**" if name == primary_arm else name
        lines.append(
            f"| {label} | {s['backend']} | {s['dtype']} | {s['batch_size']} | {s['decoding']} | "
            f"{s['seed']} | "
            f"{s['max_new_tokens']} | {n} | {closed} | {truncated} | {fmt_num(tokens.get('median'))} | "
            f"{fmt_num(tokens.get('tokens_per_s'), 1)} |"
        )
    claim_metric = analysis["claim"]["metric"]
    metrics: list[str] = list(BASE_METRICS) + ([claim_metric] if claim_metric not in BASE_METRICS else [])
    lines += [
        "",
        "| arm | " + " | ".join(METRIC_LABELS.get(m, m) for m in metrics) + " |",
        "|---" * (len(metrics) + 1) + "|",
    ]
    for name, arm in analysis["arms"].items():
        label = f"**{name}**" if name == primary_arm else name
        lines.append(f"| {label} | " + " | ".join(_metric_cell(arm, m, kind) for m in metrics) + " |")
    confidence = rule.get("confidence", 0.95)
    boot = (
        f"cluster bootstrap ({rule.get('bootstrap_resamples', '?')} resamples, seed "
        f"{rule.get('bootstrap_seed', '?')})"
    )
    which = (
        f"{boot} for every metric"
        if kind == "bootstrap"
        else f"{INTERVAL_NAMES.get(kind, kind)} for prompt-level metrics, {boot} for instruction-level "
        "metrics and averages"
    )
    lines += [
        "",
        f"Scores in percent, (passed/total), then the {confidence:.0%} interval: {which}. "
        "Bold: the verdict arm. "
        "Truncated: responses that hit the token cap. Tokens/s is generation throughput (no model load) "
        "on the machine below.",
    ]
    return lines


def comparisons_block(data: ReportInput) -> list[str]:
    """The plan's paired comparisons: discordant counts b and c, exact McNemar p, the difference
    with its interval, the verdict; then each distinct decision rule in words."""
    comparisons = data.analysis.get("comparisons", {})
    if not comparisons:
        return ["The plan declares no paired comparisons."]
    lines = [
        "| comparison | a vs b | metric | pairs | b | c | p | difference a − b | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rules: list[str] = []
    for name, comp in comparisons.items():
        difference = comp.get("difference") or {}
        diff = (
            "—"
            if not difference
            else f"{fmt_pct(difference['value_pct'])} {fmt_interval(difference['interval'])}"
        )
        lines.append(
            f"| {name} | {comp['arms'][0]} vs {comp['arms'][1]} | `{comp.get('metric', '?')}` | "
            f"{comp['n_pairs']} | "
            f"{comp['b']} | {comp['c']} | {fmt_p(comp['p_value'])} | {diff} | {comp['verdict'].upper()} |"
        )
        if comp.get("rule") and comp["rule"] not in rules:
            rules.append(comp["rule"])
    lines += [
        "",
        "b: prompts passing in a but not in b; c: the reverse (prompt-level pass of the metric's "
        "reading). p: exact McNemar on b and c. Difference in points with its paired bootstrap interval.",
    ]
    lines += [f"Rule: {rule}." for rule in rules]
    return lines


def controls_block(data: ReportInput) -> list[str]:
    """Every control of the plan in sentences and small tables (see `capsule.report.controls`)."""
    lines: list[str] = []
    controls = data.analysis.get("controls", {})
    for name in in_control_order(controls):
        lines += control_lines(name, controls[name], data.analysis) + [""]
    return lines[:-1] if lines else ["The plan declares no controls."]


def _gib(value: Any) -> str:
    return "?" if not isinstance(value, (int, float)) else f"{value / 2**30:.1f} GiB"


def machine_block(data: ReportInput) -> list[str]:
    """The machine in a few lines from the manifest: CPU, memory, OS, GPUs, key software, scorer."""
    manifest = data.manifest
    if not manifest:
        return ["No manifest.json in this run."]
    host, software = manifest.get("host", {}), manifest.get("software", {})
    cpu, os_info = host.get("cpu", {}), host.get("os", {})
    lines = [
        f"- CPU: {cpu.get('model', '?')}, {cpu.get('logical_cores', '?')} logical cores "
        f"({cpu.get('usable_cores', '?')} usable); memory {_gib(host.get('memory', {}).get('total_bytes'))}; "
        f"{os_info.get('distribution', os_info.get('system', '?'))}, kernel {os_info.get('kernel', '?')}"
    ]
    gpus = manifest.get("gpus") or []
    system = manifest.get("gpu_system") or {}
    if gpus:
        names = ", ".join(f"{g.get('name', '?')} ({_gib(g.get('memory_total_bytes'))})" for g in gpus)
        lines.append(
            f"- GPUs: {names}; driver {system.get('driver_version', '?')}, "
            f"CUDA driver {system.get('cuda_driver_version', '?')}"
        )
    else:
        lines.append("- GPUs: none")
    packages = software.get("packages") or {}
    shown = [
        f"{e.get('distribution', n)} {e['version']}"
        for n in ("torch", "transformers", "vllm", "nltk")
        if (e := packages.get(n) or {}).get("version")
    ]
    torch_build = software.get("torch_build") or {}
    cuda = f" (CUDA {torch_build['cuda']})" if torch_build.get("cuda") else ""
    lines.append(f"- software: Python {software.get('python', '?')}; " + ", ".join(shown) + cuda)
    scorer = manifest.get("scorer") or {}
    if scorer:
        lines.append(
            f"- scorer: {scorer.get('package', '?')} {scorer.get('version', '?')}, "
            f"source digest `{str(scorer.get('source_digest', ''))[:16]}…`"
        )
    capture = manifest.get("capture") or {}
    if capture.get("created_at"):
        lines.append(f"- manifest captured {capture['created_at']} (full record: `manifest.json`)")
    return lines


Block = Callable[[ReportInput], list[str]]

#: Block name -> renderer. Names are what `block=` in a `capsule:numbers` marker may say.
BLOCKS: dict[str, Block] = {
    "summary": summary_block,
    "headline": headline_block,
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
