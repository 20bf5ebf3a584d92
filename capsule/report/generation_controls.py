"""The generation controls in RESULTS.md: rerun identity, batch-size and backend contrasts, seed vs batch.

Renders the sections `capsule.analysis.controls` writes (`capsule.analysis.control_schema`); each
renderer is named by its kind's row in `capsule.prereg.control_kinds`. Numbers go through
`capsule.report.formatting`, so `capsule check-numbers` can re-render them.
"""

from __future__ import annotations

from typing import Any

from capsule.analysis.control_schema import (
    ContrastSection,
    ControlSection,
    Divergence,
    Identity,
    IdentityPair,
    PairSettings,
    RerunSection,
    SeedVsBatchSection,
)
from capsule.analysis.schema import Analysis
from capsule.report.formatting import (
    DASH,
    fmt_count,
    fmt_interval,
    fmt_num,
    fmt_p,
    fmt_pct,
    fmt_share,
    plural,
)

SETTING_WORDS = {"batch_size": "batch", "backend": "", "dtype": ""}
SETTING_KEYS = ("backend", "batch_size", "dtype")


def _unit(divergence: Divergence) -> str:
    units = set(str(divergence.unit or "").split("+")) - {""}
    if units and units <= {"output_ids", "tokenize"}:
        return "token"
    return "character" if units == {"characters"} else "token or character"


def divergence_text(divergence: Divergence | None) -> str:
    """Where differing outputs first part, in words (median, min, max of the first differing index)."""
    if not divergence or not divergence.n:
        return DASH
    return (
        f"{_unit(divergence)} {fmt_num(divergence.median)} "
        f"({fmt_num(divergence.min)}–{fmt_num(divergence.max)})"
    )


def _identity_text(pair: Identity) -> str:
    text = f"{fmt_count(pair.identical, pair.n_common)}"
    if pair.identical_response != pair.identical:
        text += f" (scored responses {fmt_count(pair.identical_response, pair.n_common)})"
    return text


def _pair_notes(pair: IdentityPair) -> list[str]:
    notes = []
    a, b = pair.arms
    if pair.only_in_a or pair.only_in_b:
        notes.append(
            f"{a} vs {b}: {pair.only_in_a} prompts only in {a}, "
            f"{pair.only_in_b} only in {b} (partial arms; compared on common prompts)"
        )
    if pair.input_ids_mismatch:
        notes.append(f"{a} vs {b}: input ids differ on {plural(len(pair.input_ids_mismatch), 'prompt')}")
    return notes


def _notes(notes: list[str]) -> list[str]:
    return ([""] + [f"- {note}" for note in notes]) if notes else []


def render_rerun(control: ControlSection, analysis: Analysis) -> list[str]:
    """A rerun_identity section: the determinism finding, then identity per pair."""
    assert isinstance(control, RerunSection)
    lines = ["| a vs b | byte-identical | first divergence: median (min–max) |", "|---|---|---|"]
    notes: list[str] = []
    for pair in control.pairs:
        lines.append(
            f"| {pair.arms[0]} vs {pair.arms[1]} | {_identity_text(pair)} | "
            f"{divergence_text(pair.first_divergence)} |"
        )
        notes += _pair_notes(pair)
    verdict = (
        "Every rerun repeated its outputs byte for byte."
        if control.all_identical
        else "Reruns with identical settings did not repeat every output: generation is not "
        "deterministic on this machine."
    )
    return [verdict, ""] + lines + _notes(notes)


def _differing(settings: dict[str, PairSettings], arms: list[str]) -> tuple[str, str]:
    a, b = (settings[arm] for arm in arms)
    differ = [k for k in SETTING_KEYS if getattr(a, k) != getattr(b, k)]
    same = [k for k in SETTING_KEYS if k not in differ]

    def word(key: str, value: Any) -> str:
        return f"{SETTING_WORDS[key]} {value}".strip()

    changed = (
        ", ".join(f"{word(k, getattr(a, k))} vs {word(k, getattr(b, k))}" for k in differ) or "same settings"
    )
    return changed, ", ".join(word(k, getattr(a, k)) for k in same)


def render_contrast(control: ControlSection, analysis: Analysis) -> list[str]:
    """A batch_size or backend section: per pair, the setting, identity, divergence, paired test."""
    assert isinstance(control, ContrastSection)
    lines = [
        "| a vs b | setting | byte-identical | first divergence: median (min–max) | b | c | p | "
        "difference a − b | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    metric = None
    for pair in control.pairs:
        changed, same = _differing(pair.settings, pair.arms)
        paired = pair.paired
        metric = paired.metric
        difference = paired.difference
        diff = (
            DASH
            if difference is None
            else f"{fmt_pct(difference.value_pct)} {fmt_interval(difference.interval)}"
        )
        lines.append(
            f"| {pair.arms[0]} vs {pair.arms[1]} | {changed}"
            + (f" ({same})" if same else "")
            + f" | {_identity_text(pair)} | {divergence_text(pair.first_divergence)} | "
            f"{paired.b} | {paired.c} | {fmt_p(paired.p_value)} | {diff} | "
            f"{paired.verdict.upper()} |"
        )
        notes += _pair_notes(pair)
    intro = (
        "Outputs compared byte for byte; where they differ, the index at which they first part. "
        f"Then the paired test on `{metric}` (b, c: discordant prompts; exact McNemar p)."
    )
    return [intro, ""] + lines + _notes(notes)


def render_seed_vs_batch(control: ControlSection, analysis: Analysis) -> list[str]:
    """A seed_vs_batch section: each source's mean change, the larger source, then every pair."""
    assert isinstance(control, SeedVsBatchSection)
    summary = control.summary

    def source(name: str, words: str) -> str:
        entry = summary[name]
        share = entry.mean_discordant_share
        return (
            f"between {words}, {fmt_share(None if share is None else share * 100)} of prompts change "
            f"pass/fail on average (mean |difference| {fmt_pct(entry.mean_abs_difference_pct)} "
            f"points, {plural(entry.pairs, 'pair')})"
        )

    larger = str(control.larger)
    verdict = {"seed": "the seed", "batch": "the batch size", "equal": "neither (equal)"}.get(
        larger, "not known"
    )
    lines = [
        f"On `{control.metric}`: {source('seed', 'seeds at a fixed batch size')}; "
        f"{source('batch', 'batch sizes at a fixed seed')}. Larger source of variation: {verdict}.",
        "",
        "| varied | a vs b | held fixed | byte-identical | discordant | difference a − b |",
        "|---|---|---|---|---|---|",
    ]
    for varied, pairs in (("seed", control.seed_pairs), ("batch", control.batch_pairs)):
        for pair in pairs:
            fixed = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in pair.fixed.items())
            lines.append(
                f"| {varied} | {pair.arms[0]} vs {pair.arms[1]} | {fixed} | "
                f"{fmt_count(pair.identical, pair.n_pairs)} | "
                f"{fmt_count(pair.discordant, pair.n_pairs)} | {fmt_pct(pair.difference_pct)} |"
            )
    return lines
