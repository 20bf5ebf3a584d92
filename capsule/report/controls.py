"""The Controls section of RESULTS.md: each control kind in sentences and small tables.

Renders the sections `capsule.analysis.controls` and `capsule.analysis.scorer_controls` write into
analysis.json (rerun identity, batch-size and backend contrasts, seed vs batch, scorer stability
and letter band, scorer sanity). Numbers go through `capsule.report.formatting`, so
`capsule check-numbers` can re-render them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from capsule.report.formatting import (
    DASH,
    METRIC_LABELS,
    fmt_count,
    fmt_interval,
    fmt_num,
    fmt_p,
    fmt_pct,
    fmt_share,
    in_metric_order,
    plural,
)

Section = Mapping[str, Any]

KIND_TITLES: dict[str, str] = {
    "rerun_identity": "rerun identity",
    "batch_size": "batch-size contrast",
    "backend": "backend contrast",
    "seed_vs_batch": "seed vs batch size",
    "scorer_stability": "scorer stability",
    "scorer_sanity": "scorer sanity",
}
SETTING_WORDS = {"batch_size": "batch", "backend": "", "dtype": ""}
UNSTABLE_SHOWN = 10
ECHO_TOP = 3


def scorer_echo(analysis: Section, metric: str) -> tuple[float, int] | None:
    """(value in percent, prompts) of the prompt-echo baseline on `metric`, from the first
    scorer-sanity control that has one; None when the plan has no such control."""
    for control in analysis.get("controls", {}).values():
        echo = control.get("echo") if control.get("kind") == "scorer_sanity" else None
        if echo and metric in echo.get("metrics_pct", {}):
            return echo["metrics_pct"][metric], echo.get("n", 0)
    return None


def _unit(divergence: Section) -> str:
    units = set(str(divergence.get("unit") or "").split("+")) - {""}
    if units and units <= {"output_ids", "tokenize"}:
        return "token"
    return "character" if units == {"characters"} else "token or character"


def divergence_text(divergence: Section | None) -> str:
    """Where differing outputs first part, in words (median, min, max of the first differing index)."""
    if not divergence or not divergence.get("n"):
        return DASH
    return (
        f"{_unit(divergence)} {fmt_num(divergence['median'])} "
        f"({fmt_num(divergence['min'])}–{fmt_num(divergence['max'])})"
    )


def _identity_text(pair: Section) -> str:
    text = f"{fmt_count(pair['identical'], pair['n_common'])}"
    if pair.get("identical_response") is not None and pair["identical_response"] != pair["identical"]:
        text += f" (scored responses {fmt_count(pair['identical_response'], pair['n_common'])})"
    return text


def _pair_notes(pair: Section) -> list[str]:
    notes = []
    a, b = pair["arms"]
    if pair.get("only_in_a") or pair.get("only_in_b"):
        notes.append(
            f"{a} vs {b}: {pair.get('only_in_a', 0)} prompts only in {a}, "
            f"{pair.get('only_in_b', 0)} only in {b} (partial arms; compared on common prompts)"
        )
    if pair.get("input_ids_mismatch"):
        notes.append(f"{a} vs {b}: input ids differ on {plural(len(pair['input_ids_mismatch']), 'prompt')}")
    return notes


def _head(name: str, control: Section) -> str:
    kind = control.get("kind", "")
    head = f"**{name}** ({KIND_TITLES.get(kind, kind)})"
    if control.get("failures"):
        head += ": FAILED: " + "; ".join(control["failures"])
    description = str(control.get("description") or "").strip()
    return head + (f". {description}" if description else "")


def _rerun(control: Section, analysis: Section) -> list[str]:
    lines = ["| a vs b | byte-identical | first divergence: median (min–max) |", "|---|---|---|"]
    notes: list[str] = []
    for pair in control.get("pairs", []):
        lines.append(
            f"| {pair['arms'][0]} vs {pair['arms'][1]} | {_identity_text(pair)} | "
            f"{divergence_text(pair.get('first_divergence'))} |"
        )
        notes += _pair_notes(pair)
    verdict = (
        "Every rerun repeated its outputs byte for byte."
        if control.get("all_identical")
        else "Reruns with identical settings did not repeat every output: generation is not "
        "deterministic on this machine."
    )
    return [verdict, ""] + lines + _notes(notes)


def _differing(settings: Mapping[str, Mapping[str, Any]], pair: Section) -> tuple[str, str]:
    a, b = (settings.get(arm, {}) for arm in pair["arms"])
    differ = [k for k in ("backend", "batch_size", "dtype") if a.get(k) != b.get(k)]
    same = [k for k in ("backend", "batch_size", "dtype") if k not in differ and k in a]

    def word(key: str, value: Any) -> str:
        return f"{SETTING_WORDS[key]} {value}".strip()

    changed = ", ".join(f"{word(k, a.get(k))} vs {word(k, b.get(k))}" for k in differ) or "same settings"
    return changed, ", ".join(word(k, a.get(k)) for k in same)


def _contrast(control: Section, analysis: Section) -> list[str]:
    lines = [
        "| a vs b | setting | byte-identical | first divergence: median (min–max) | b | c | p | "
        "difference a − b | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    metric = None
    for pair in control.get("pairs", []):
        changed, same = _differing(pair.get("settings", {}), pair)
        paired = pair.get("paired") or {}
        metric = paired.get("metric", metric)
        difference = paired.get("difference") or {}
        diff = (
            DASH
            if not difference
            else f"{fmt_pct(difference['value_pct'])} {fmt_interval(difference['interval'])}"
        )
        lines.append(
            f"| {pair['arms'][0]} vs {pair['arms'][1]} | {changed}"
            + (f" ({same})" if same else "")
            + f" | {_identity_text(pair)} | {divergence_text(pair.get('first_divergence'))} | "
            f"{paired.get('b', DASH)} | {paired.get('c', DASH)} | {fmt_p(paired.get('p_value'))} | {diff} | "
            f"{str(paired.get('verdict', DASH)).upper()} |"
        )
        notes += _pair_notes(pair)
    intro = (
        "Outputs compared byte for byte; where they differ, the index at which they first part. "
        f"Then the paired test on `{metric}` (b, c: discordant prompts; exact McNemar p)."
    )
    return [intro, ""] + lines + _notes(notes)


def _seed_vs_batch(control: Section, analysis: Section) -> list[str]:
    summary = control.get("summary", {})

    def source(name: str, words: str) -> str:
        entry = summary.get(name, {})
        share = entry.get("mean_discordant_share")
        return (
            f"between {words}, {fmt_share(None if share is None else share * 100)} of prompts change "
            f"pass/fail on average (mean |difference| {fmt_pct(entry.get('mean_abs_difference_pct'))} "
            f"points, {plural(entry.get('pairs', 0), 'pair')})"
        )

    larger = str(control.get("larger"))
    verdict = {"seed": "the seed", "batch": "the batch size", "equal": "neither (equal)"}.get(
        larger, "not known"
    )
    lines = [
        f"On `{control.get('metric', '?')}`: {source('seed', 'seeds at a fixed batch size')}; "
        f"{source('batch', 'batch sizes at a fixed seed')}. Larger source of variation: {verdict}.",
        "",
        "| varied | a vs b | held fixed | byte-identical | discordant | difference a − b |",
        "|---|---|---|---|---|---|",
    ]
    for varied, key in (("seed", "seed_pairs"), ("batch", "batch_pairs")):
        for pair in control.get(key, []):
            fixed = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in pair.get("fixed", {}).items())
            lines.append(
                f"| {varied} | {pair['arms'][0]} vs {pair['arms'][1]} | {fixed} | "
                f"{fmt_count(pair['identical'], pair['n_pairs'])} | "
                f"{fmt_count(pair['discordant'], pair['n_pairs'])} | {fmt_pct(pair.get('difference_pct'))} |"
            )
    return lines


def _band_cell(band: Section, metric: str) -> str:
    entry = (band.get("metrics") or {}).get(metric)
    if not entry:
        return DASH
    return f"[{fmt_pct(round(entry['low'] * 100, 2))}, {fmt_pct(round(entry['high'] * 100, 2))}]"


def _stability(control: Section, analysis: Section) -> list[str]:
    arm, k = control.get("arms", ["?"])[0], control.get("k", 0)
    unstable = control.get("unstable_prompts", [])
    band = control.get("band") or {}
    lines = [
        f"Arm `{arm}` scored {plural(k, 'time')} unseeded, as the official scorer runs "
        f"(random letter draws): {plural(len(unstable), 'prompt')} changed verdict between runs.",
        "",
        "| metric | seeded | unseeded min | unseeded max | spread | letter band |",
        "|---|---|---|---|---|---|",
    ]
    metrics = control.get("metrics", {})
    for metric in in_metric_order(metrics):
        entry = metrics[metric]
        lines.append(
            f"| {METRIC_LABELS.get(metric, metric)} | {fmt_pct(entry.get('seeded_pct'))} | "
            f"{fmt_pct(entry.get('min_pct'))} | {fmt_pct(entry.get('max_pct'))} | "
            f"{fmt_pct(entry.get('spread_pct'))} | {_band_cell(band, metric)} |"
        )
    keys = list(band.get("ambiguous_keys") or [])
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
    for entry in unstable[:UNSTABLE_SHOWN]:
        lines.append(
            f"- key {entry['key']}: {', '.join(entry.get('instructions', []))} "
            f"({', '.join(entry.get('readings', []))})"
        )
    if len(unstable) > UNSTABLE_SHOWN:
        lines.append(f"- and {len(unstable) - UNSTABLE_SHOWN} more (analysis.json)")
    return lines


def _every(metrics: Mapping[str, float], expected: float) -> str:
    off = {m: v for m, v in metrics.items() if v != expected}
    if not off:
        return f"{fmt_pct(expected)} on every metric"
    return ", ".join(f"{METRIC_LABELS.get(m, m)} {fmt_pct(metrics[m])}" for m in in_metric_order(metrics))


def _sanity(control: Section, analysis: Section) -> list[str]:
    lines = []
    empty = control.get("empty")
    if empty:
        ok = all(v == 0.0 for v in empty["metrics_pct"].values())
        lines.append(
            f"- Empty responses ({empty['n']}): {_every(empty['metrics_pct'], 0.0)} "
            f"(must be 0): {'passed' if ok else 'FAILED'}."
        )
    echo = control.get("echo")
    if echo:
        metrics = echo["metrics_pct"]
        shown = ", ".join(
            f"{METRIC_LABELS.get(m, m)} {fmt_pct(metrics[m])}" for m in in_metric_order(metrics)
        )
        counts = Counter(p["instruction_id"] for p in echo.get("passes", []))
        top = ", ".join(
            f"`{i}` {c}" for i, c in sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:ECHO_TOP]
        )
        lines.append(
            f"- Prompt echoes ({echo['n']}, the prompt text as the answer): {shown}. "
            f"{plural(sum(counts.values()), 'instruction pass', 'instruction passes')}, "
            "each scored against the prompt's own "
            f"instructions"
            + (f"; most often {top}" if top else "")
            + ". A baseline any model must beat, not a pass threshold."
        )
    compliant = control.get("compliant") or {}
    if "skipped" in compliant:
        lines.append(f"- Compliant answers: skipped ({compliant['skipped']}).")
    elif compliant:
        failing = compliant.get("failing", [])
        ok = not failing and all(v == 100.0 for v in compliant["metrics_pct"].values())
        lines.append(
            f"- Hand-written compliant answers ({compliant['n']}): {_every(compliant['metrics_pct'], 100.0)} "
            f"(must be 100): {'passed' if ok else 'FAILED'}"
            + (f"; failing: {_failing(failing)}" if failing else "")
            + "."
        )
    return lines


def _failing(failing: list[Mapping[str, Any]]) -> str:
    return ", ".join(f"key {f['key']} `{f['instruction_id']}`" for f in failing[:UNSTABLE_SHOWN])


def _notes(notes: list[str]) -> list[str]:
    return ([""] + [f"- {note}" for note in notes]) if notes else []


RENDERERS: dict[str, Callable[[Section, Section], list[str]]] = {
    "rerun_identity": _rerun,
    "batch_size": _contrast,
    "backend": _contrast,
    "seed_vs_batch": _seed_vs_batch,
    "scorer_stability": _stability,
    "scorer_sanity": _sanity,
}


#: The order controls appear in: generation determinism first, then the scorer.
KIND_ORDER = tuple(KIND_TITLES)


def in_control_order(controls: Mapping[str, Section]) -> list[str]:
    """Control names ordered by kind (as `KIND_ORDER`), then by name."""
    rank = {kind: i for i, kind in enumerate(KIND_ORDER)}
    return sorted(controls, key=lambda n: (rank.get(controls[n].get("kind", ""), len(rank)), n))


def control_lines(name: str, control: Section, analysis: Section) -> list[str]:
    """One control as a bold heading line followed by its sentences and table."""
    head = _head(name, control)
    if "skipped" in control:
        return [f"{head}: skipped ({control['skipped']})."]
    renderer = RENDERERS.get(control.get("kind", ""))
    if renderer is None:
        return [f"{head}: no renderer for this kind; see analysis.json."]
    return [head, ""] + renderer(control, analysis)
