"""Markdown for `capsule compare`: two runs of one plan side by side, from the dict it computed.

Every number goes through `capsule.report.formatting`, as in RESULTS.md. One table of arms
(identical responses, first divergence, pass/fail changes on the claim's metric, the claim metric's
difference A - B with its interval and McNemar p), one table of every metric's difference per arm,
the verdicts side by side, and the manifests' numerics-relevant differences as candidate causes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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


def render_comparison(comparison: Mapping[str, Any]) -> str:
    """The Markdown report of a `compare_runs` result."""
    runs = comparison["runs"]
    plan = comparison["plan"] or {}
    arms = comparison["arms"]
    same = sum(a["identity"]["identical_response"] == a["identity"]["n_common"] for a in arms)
    lines = [
        f"# Two runs of `{plan.get('path')}` compared",
        "",
        f"- A: `{runs['A']['path']}`: {runs['A']['verified']}",
        f"- B: `{runs['B']['path']}`: {runs['B']['verified']}",
        "",
        f"{same} of {len(arms)} arms byte-identical in every response; differences are A − B in "
        "percentage points on the prompts both runs scored.",
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
