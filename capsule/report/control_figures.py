"""The plots of controls: where contrast outputs first diverge, and the scorer's spread and letter band.

Each is a function of the analysis (`capsule.analysis.schema.Analysis`), drawn on the fixed canvas
of `capsule.report.canvas`; None means there is nothing to plot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from capsule.analysis.control_schema import ContrastPair, ContrastSection, StabilitySection
from capsule.analysis.paired_schema import Bounds
from capsule.analysis.schema import Analysis
from capsule.report.canvas import ARM_COLOR, PRIMARY_COLOR, legend_below, new_figure, right_labels
from capsule.report.formatting import METRIC_LABELS, fmt_interval, fmt_pct, in_metric_order
from capsule.report.generation_controls import divergence_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _contrast_pairs(analysis: Analysis) -> list[tuple[str, ContrastPair]]:
    found = []
    for name, control in sorted(analysis.controls.items()):
        if isinstance(control, ContrastSection):
            found += [(name, pair) for pair in control.pairs]
    return found


def divergence_figure(analysis: Analysis) -> Figure | None:
    """Cumulative share of prompts whose outputs have diverged by each index, per batch-size and
    backend contrast pair (identical outputs never diverge, so a curve tops out below 100%)."""
    pairs = _contrast_pairs(analysis)
    if not pairs:
        return None
    diverged = any(p.first_divergence.n for _, p in pairs)
    fig = new_figure(6 if diverged else len(pairs) + 2, 1.6)
    ax = fig.add_subplot()
    labels = [
        f"{name}: {p.arms[0]} vs {p.arms[1]} ({p.identical}/{p.n_common} byte-identical)" for name, p in pairs
    ]
    ax.set_title("Where outputs first diverge: batch-size and backend contrasts")
    if not diverged:
        ax.text(
            0.5,
            0.5,
            "Nothing diverges: every output is byte-identical in every contrast.\n\n" + "\n".join(labels),
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=8,
        )
        ax.set_xticks([])
        ax.set_yticks([])
        return fig
    top = max(p.first_divergence.max or 0 for _, p in pairs)
    units = {divergence_text(p.first_divergence).split(" ")[0] for _, p in pairs if p.first_divergence.n}
    for label, (_, pair) in zip(labels, pairs, strict=True):
        indices, n = pair.first_divergence.indices, max(pair.n_common, 1)
        xs = [0, *indices, top * 1.05 + 1]
        ys = [0.0] + [100.0 * (i + 1) / n for i in range(len(indices))] + [100.0 * len(indices) / n]
        ax.step(xs, ys, where="post", lw=1.6, label=label)
    ax.set_ylim(-2, 102)
    ax.set_xlim(0, top * 1.05 + 1)
    unit = units.pop() if len(units) == 1 else "token"
    ax.set_xlabel(f"first differing {unit} index (0 = the first generated {unit})")
    ax.set_ylabel("prompts diverged (% of common)")
    legend_below(fig, 1)
    return fig


def scorer_figure(analysis: Analysis) -> Figure | None:
    """Per metric: the scorer's letter band, each unseeded run's value and the seeded value."""
    controls = [(n, c) for n, c in sorted(analysis.controls.items()) if isinstance(c, StabilitySection)]
    if not controls:
        return None
    name, control = controls[0]
    metrics = in_metric_order(control.metrics)
    band = control.band.metrics
    bands = {m: (100 * band[m].low, 100 * band[m].high) for m in metrics if m in band}
    points = [v for m in metrics for v in control.metrics[m].values_pct]
    points += [v for pair in bands.values() for v in pair]
    points += [v for m in metrics if (v := control.metrics[m].seeded_pct) is not None]
    low_x, high_x = min(points, default=0.0), max(points, default=100.0)
    pad = max(1.0, 0.08 * (high_x - low_x))
    fig = new_figure(len(metrics), 1.6)
    ax = fig.add_subplot()
    ax.set_xlim(low_x - pad, high_x + pad)
    min_width = 0.006 * (high_x - low_x + 2 * pad)  # a zero-width band still shows as a thin bar
    ys = list(range(len(metrics)))[::-1]
    labels, legend_done = [], set()

    def once(label: str) -> str | None:
        if label in legend_done:
            return None
        legend_done.add(label)
        return label

    for y, metric in zip(ys, metrics, strict=True):
        entry = control.metrics[metric]
        if metric in bands:
            low, high = bands[metric]
            width = max(high - low, min_width)
            ax.barh(
                [y],
                [width],
                left=[(low + high - width) / 2],
                height=0.6,
                color="#d5f5e3",
                edgecolor="#27ae60",
                label=once("letter band (every letter tried)"),
            )
        values = entry.values_pct
        ax.plot(values, [y] * len(values), "x", color=ARM_COLOR, ms=8, mew=1.5, label=once("unseeded run"))
        if entry.seeded_pct is not None:
            ax.plot(
                [entry.seeded_pct],
                [y],
                "D",
                mfc="none",
                color=PRIMARY_COLOR,
                ms=7,
                mew=1.5,
                label=once("seeded (reported)"),
            )
        band_text = f"; band {fmt_interval(Bounds(*bands[metric]))}" if metric in bands else ""
        labels.append(f"spread {fmt_pct(entry.spread_pct)}{band_text}")
    ax.set_yticks(ys, [METRIC_LABELS.get(m, m) for m in metrics])
    right_labels(ax, ys, labels)
    ax.set_ylim(-0.7, len(metrics) - 0.3)
    ax.set_xlabel("score (%)")
    ax.set_title(f"Scorer spread on {control.arms[0]}: {control.k} unseeded runs ({name})")
    legend_below(fig, 3)
    ax.grid(axis="y", visible=False)
    return fig
