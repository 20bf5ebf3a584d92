"""Markdown for `capsule compare`: two runs of one plan side by side, from the dict it computed.

Every number goes through `capsule.report.formatting`, as in RESULTS.md. One table of arms
(identical responses, first divergence, pass/fail changes on the claim's metric, the claim metric's
difference A - B with its interval and McNemar p), one table of every metric's difference per arm,
the verdicts side by side, and the manifests' numerics-relevant differences as candidate causes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from capsule.report.formatting import DASH, METRIC_LABELS, fmt_count, fmt_num, fmt_p, fmt_pct


def _divergence(identity: Mapping[str, Any]) -> str:
    first = identity["first_divergence"]
    if not first["n"]:
        return DASH
    unit = first.get("unit") or "tokens"
    return f"{fmt_num(first['median'])} ({first['min']}–{first['max']}) {unit}"


def _difference(paired: Mapping[str, Any]) -> str:
    difference = paired.get("difference")
    if not difference:
        return DASH
    low, high = difference["interval"]["low_pct"], difference["interval"]["high_pct"]
    return f"{fmt_pct(difference['value_pct'])} [{fmt_pct(low)}, {fmt_pct(high)}]"


def _arm_rows(comparison: Mapping[str, Any]) -> list[str]:
    metric = comparison["claim"]["metric"]
    label = METRIC_LABELS.get(metric, metric)
    lines = [
        f"| arm | identical responses | first divergence, median (min–max) | pass/fail changed | "
        f"{label} A − B [95% CI] | McNemar p |",
        "|---|---|---|---|---|---|",
    ]
    for arm in comparison["arms"]:
        identity, paired = arm["identity"], arm["metrics"][metric]
        lines.append(
            f"| `{arm['arm']}` | {fmt_count(identity['identical_response'], identity['n_common'])} | "
            f"{_divergence(identity)} | {arm['pass_fail_changed']} | {_difference(paired)} | "
            f"{fmt_p(paired['p_value'])} |"
        )
    return lines


def _metric_rows(comparison: Mapping[str, Any]) -> list[str]:
    metrics = list(comparison["arms"][0]["metrics"]) if comparison["arms"] else []
    lines = [
        "| arm | " + " | ".join(METRIC_LABELS.get(m, m) for m in metrics) + " |",
        "|---|" + "---|" * len(metrics),
    ]
    for arm in comparison["arms"]:
        paired = arm["metrics"]
        cells = [f"{_difference(paired[m])}, p {fmt_p(paired[m]['p_value'])}" for m in metrics]
        lines.append(f"| `{arm['arm']}` | " + " | ".join(cells) + " |")
    return lines


def _verdict_rows(comparison: Mapping[str, Any]) -> list[str]:
    claim = comparison["claim"]
    lines = ["| verdict | A | B | agree |", "|---|---|---|---|"]
    lines.append(
        f"| claim ({claim['metric']} on `{claim['arm']}`) | {claim['A']} | {claim['B']} | "
        f"{'yes' if claim['agree'] else 'NO'} |"
    )
    for name, row in comparison["comparisons"].items():
        lines.append(f"| comparison `{name}` | {row['A']} | {row['B']} | {'yes' if row['agree'] else 'NO'} |")
    return lines


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def _cause_rows(comparison: Mapping[str, Any]) -> list[str]:
    causes = comparison["candidate_causes"]
    if not causes:
        return ["None: the manifests agree on every field that can change numerics."]
    lines = ["| field | A | B | why it can matter |", "|---|---|---|---|"]
    for cause in causes:
        values = f"{_value(cause['a'])} | {_value(cause['b'])}"
        lines.append(f"| `{cause['path']}` | {values} | {cause['reason']} |")
    return lines


def _run_line(label: str, run: Mapping[str, Any]) -> str:
    """One run as verified, in words that stay true while the ledger grows (no entry count)."""
    where = (
        f"recorded in this ledger at entry {run['ledger_seq']}" if run["ledger_seq"] is not None
        else "not in this ledger (signature and digests only)"
    )
    return (
        f"- {label}: `{run['path']}` (run {run['run_id']}): {run['n_files']} files ({run['total_bytes']} "
        f"bytes) match its signed bundle; signed by {run['fingerprint'][:16]}; {where}"
    )


def _identical_arms(comparison: Mapping[str, Any]) -> int:
    return sum(a["identity"]["identical_response"] == a["identity"]["n_common"] for a in comparison["arms"])


def _changed_arms(comparison: Mapping[str, Any]) -> list[str]:
    """`arm` (N responses, M pass/fail) for each arm whose responses differ, in plan order."""
    out = []
    for arm in comparison["arms"]:
        identity = arm["identity"]
        differ = identity["n_common"] - identity["identical_response"]
        if differ:
            out.append(f"`{arm['arm']}` ({differ} responses, {arm['pass_fail_changed']} pass/fail)")
    return out


def comparison_summary(comparison: Mapping[str, Any]) -> str:
    """One paragraph for a README: identical arms, what changed where, the claim's verdicts, the causes."""
    arms = comparison["arms"]
    claim = comparison["claim"]
    differ = sum(a["identity"]["n_common"] - a["identity"]["identical_response"] for a in arms)
    flips = sum(a["pass_fail_changed"] for a in arms)
    changed = _changed_arms(comparison)
    label = METRIC_LABELS.get(claim["metric"], claim["metric"])
    where = f": {', '.join(changed)}" if changed else ""
    verdict = (
        f"the claim's verdict is {claim['A']} in both" if claim["agree"]
        else f"the claim's verdict is {claim['A']} in A and {claim['B']} in B"
    )
    causes = [c["path"] for c in comparison["candidate_causes"]]
    cause_text = (
        f"The manifests differ in {len(causes)} field(s) that can change numerics: "
        + ", ".join(f"`{c}`" for c in causes) + "."
        if causes else "The manifests agree on every field that can change numerics."
    )
    return (
        f"Runs {comparison['runs']['A']['run_id']} (A) and {comparison['runs']['B']['run_id']} (B) of "
        f"`{(comparison['plan'] or {}).get('path')}`: {_identical_arms(comparison)} of {len(arms)} arms "
        f"byte-identical in every response; {differ} responses and {flips} pass/fail outcomes on {label} "
        f"differ{where}; {verdict}. {cause_text}"
    )


def render_comparison(comparison: Mapping[str, Any]) -> str:
    """The Markdown report of a `compare_runs` result."""
    runs = comparison["runs"]
    plan = comparison["plan"] or {}
    arms = comparison["arms"]
    lines = [
        f"# Two runs of `{plan.get('path')}` compared",
        "",
        _run_line("A", runs["A"]),
        _run_line("B", runs["B"]),
        "",
        f"{_identical_arms(comparison)} of {len(arms)} arms byte-identical in every response; differences "
        "are A − B in percentage points on the prompts both runs scored.",
        "",
        *_arm_rows(comparison),
        "",
        "## Every metric, A − B [95% CI], exact McNemar p",
        "",
        *_metric_rows(comparison),
        "",
        "## Verdicts",
        "",
        *_verdict_rows(comparison),
        "",
        "## Candidate causes: manifest differences that can change numerics",
        "",
        *_cause_rows(comparison),
    ]
    return "\n".join(lines) + "\n"


def comparison_block(comparison: Mapping[str, Any]) -> str:
    """The whole comparison report, as a committed comparison file quotes it."""
    return render_comparison(comparison).rstrip("\n")


#: Block name -> renderer of a `compare_runs` result: what `block=` may say in a region with `against=`.
COMPARISON_BLOCKS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "comparison": comparison_block,
    "comparison_summary": comparison_summary,
}


def marked_comparison(block: str, comparison: Mapping[str, Any]) -> str:
    """Block `block` of `comparison` between its markers, the runs named as in `comparison["runs"]`."""
    runs = comparison["runs"]
    return "\n".join([
        f"<!-- capsule:numbers run={runs['A']['path']} against={runs['B']['path']} block={block} -->",
        COMPARISON_BLOCKS[block](comparison),
        "<!-- /capsule:numbers -->",
    ])
