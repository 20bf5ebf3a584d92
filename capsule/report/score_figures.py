"""The plots of scores: each arm's value of the claim's metric, and the paired comparisons' discordance.

Each is a function of the analysis (`capsule.analysis.schema.Analysis`), drawn on the fixed canvas
of `capsule.report.canvas`; None means there is nothing to plot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from capsule.analysis.paired_schema import Bounds
from capsule.analysis.schema import Analysis
from capsule.prereg.metrics import interval_kind
from capsule.report.canvas import (
    ARM_COLOR,
    B_COLOR,
    C_COLOR,
    CLAIM_COLOR,
    ECHO_COLOR,
    PRIMARY_COLOR,
    legend_below,
    new_figure,
    right_labels,
)
from capsule.report.formatting import fmt_interval, fmt_p, fmt_pct
from capsule.report.scorer_controls import scorer_echo

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def arms_figure(analysis: Analysis) -> Figure | None:
    """Each arm's value of the claim's metric with its interval, the claim line and the prompt-echo floor."""
    metric = analysis.claim.metric
    rule = analysis.verdict_rule
    rows: list[tuple[str, tuple[float, Bounds | None]]] = [
        (name, (section.value_pct, section.interval(metric, rule.interval)))
        for name, arm in analysis.arms.items()
        if (section := arm.metrics.get(metric)) is not None
    ]
    if not rows:
        return None
    fig = new_figure(len(rows), 1.6)
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    for y, (name, (value, interval)) in zip(ys, rows, strict=True):
        color = PRIMARY_COLOR if name == rule.arm else ARM_COLOR
        low, high = (interval.low_pct, interval.high_pct) if interval else (value, value)
        ax.errorbar(
            [value], [y], xerr=[[value - low], [high - value]], fmt="o", color=color, capsize=3, lw=1.5
        )
    claim = analysis.claim.value_pct
    ax.axvline(claim, color=CLAIM_COLOR, ls="--", lw=1.5, label=f"claim {fmt_pct(claim)}")
    echo = scorer_echo(analysis, metric)
    if echo is not None:
        ax.axvline(echo[0], color=ECHO_COLOR, ls=":", lw=1.5, label=f"prompt echo {fmt_pct(echo[0])}")
    ax.set_yticks(ys, [name + (" (verdict arm)" if name == rule.arm else "") for name, _ in rows])
    for label, (name, _) in zip(ax.get_yticklabels(), rows, strict=True):
        if name == rule.arm:
            label.set_fontweight("bold")
    right_labels(ax, ys, [f"{fmt_pct(v)} {fmt_interval(i)}" for _, (v, i) in rows])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel(f"{metric} (%)")
    kind = interval_kind(metric, rule.interval)
    ax.set_title(
        f"{metric} per arm with {rule.confidence:.0%} {kind.replace('_', '-')} intervals, against the claim"
    )
    legend_below(fig, 2)
    ax.grid(axis="y", visible=False)
    return fig


def discordance_figure(analysis: Analysis) -> Figure | None:
    """Per paired comparison: b (passes in a only) and c (passes in b only), with p and the verdict."""
    comparisons = analysis.comparisons
    if not comparisons:
        return None
    from matplotlib.ticker import MaxNLocator

    names = list(comparisons)
    fig = new_figure(len(names) * 2, 1.4)
    ax = fig.add_subplot()
    ys = [2.0 * i for i in range(len(names))][::-1]
    bs = [comparisons[n].b for n in names]
    cs = [comparisons[n].c for n in names]
    ax.barh([y + 0.4 for y in ys], bs, height=0.8, color=B_COLOR, label="b: passes in a only")
    ax.barh([y - 0.4 for y in ys], cs, height=0.8, color=C_COLOR, label="c: passes in b only")
    ax.set_yticks(
        ys,
        [f"{n}\n{comparisons[n].arms[0]} (a)\nvs {comparisons[n].arms[1]} (b)" for n in names],
        fontsize=8,
    )
    right_labels(
        ax,
        ys,
        [
            f"b {b}, c {c}\np {fmt_p(comparisons[n].p_value)}\n{comparisons[n].verdict.upper()}"
            for n, b, c in zip(names, bs, cs, strict=True)
        ],
    )
    ax.set_xlim(0, max([*bs, *cs, 1]) * 1.1)
    if not any(bs) and not any(cs):
        ax.text(
            0.5,
            0.5,
            "no discordant prompts in any comparison",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color=ECHO_COLOR,
        )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("discordant prompts (count)")
    ax.set_title("Paired comparisons: prompts that pass in one arm only (exact McNemar p)")
    legend_below(fig, 2)
    ax.grid(axis="y", visible=False)
    return fig
