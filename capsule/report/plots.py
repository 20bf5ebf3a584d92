"""The report's plots, as PNG files under `RUN_DIR/plots/`, byte-identical for identical inputs.

Each figure is a function of analysis.json, except the response-length plot, which reads the
`n_output_tokens` of `generations/<arm>.jsonl` (analysis.json holds only summary statistics of
lengths). Determinism: figures are drawn with matplotlib's Agg canvas (no pyplot state, no
backend selection), under matplotlib's default style plus the fixed `RC` below (DejaVu Sans, which
ships with matplotlib), at a fixed DPI and width, and saved without the PNG `Software` stamp, so
the bytes depend only on the inputs and the matplotlib/freetype versions (recorded in the manifest).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capsule.atomic import read_jsonl_complete, write_bytes_atomic
from capsule.report.controls import divergence_text
from capsule.report.formatting import fmt_interval, fmt_num, fmt_p, fmt_pct
from capsule.run_dir import RunDir

if TYPE_CHECKING:  # matplotlib is imported inside functions, so `import capsule.report.plots` stays light
    from matplotlib.figure import Figure

Section = Mapping[str, Any]

DPI = 110
WIDTH_IN = 8.0
ROW_IN = 0.36  # height per row of a horizontal plot
PNG_METADATA: dict[str, str | None] = {"Software": None}
RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.axisbelow": True,
}
CLAIM_COLOR, ECHO_COLOR, PRIMARY_COLOR, ARM_COLOR = "#c0392b", "#7f8c8d", "#1f4e9c", "#5d6d7e"
B_COLOR, C_COLOR, CAP_COLOR = "#2e86c1", "#e67e22", "#c0392b"


def _figure(rows: int, extra_in: float = 1.3) -> Figure:
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    size = (WIDTH_IN, extra_in + ROW_IN * max(rows, 1))
    # w_pad in inches: keeps the right-hand labels off the figure's edge
    return Figure(figsize=size, dpi=DPI, layout=ConstrainedLayoutEngine(w_pad=0.12))


def png_bytes(figure: Figure) -> bytes:
    """The figure as PNG bytes, without the matplotlib version stamp."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata=PNG_METADATA)
    return buffer.getvalue()


def _right_labels(ax: Any, positions: Sequence[float], labels: Sequence[str], size: float = 8) -> None:
    """Per-row annotations on a secondary y axis (laid out by constrained layout, never overlapping)."""
    side = ax.secondary_yaxis("right")
    side.set_yticks(list(positions), list(labels))
    side.tick_params(length=0, labelsize=size)


def _legend_below(fig: Figure, ncols: int = 3) -> None:
    """The figure legend under the x axis label, outside the data."""
    fig.legend(loc="outside lower center", ncols=ncols, frameon=False)


def _metric_interval(arm: Section, metric: str, kind: str) -> tuple[float, Section | None] | None:
    section = arm.get("metrics", {}).get(metric)
    if not section:
        return None
    intervals = section.get("intervals", {})
    interval = (
        intervals.get(kind)
        if metric.startswith("prompt_level") and kind in intervals
        else intervals.get("bootstrap")
    )
    return section["value_pct"], interval


def arms_figure(analysis: Section) -> Figure | None:
    """Each arm's value of the claim's metric with its interval, the claim line and the prompt-echo floor."""
    from capsule.report.controls import scorer_echo

    metric = analysis["claim"]["metric"]
    rule = analysis.get("verdict_rule", {})
    rows = [
        (name, found)
        for name, arm in analysis["arms"].items()
        if (found := _metric_interval(arm, metric, rule.get("interval", "wilson"))) is not None
    ]
    if not rows:
        return None
    fig = _figure(len(rows), 1.6)
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    for y, (name, (value, interval)) in zip(ys, rows, strict=True):
        color = PRIMARY_COLOR if name == rule.get("arm") else ARM_COLOR
        low, high = (interval["low_pct"], interval["high_pct"]) if interval else (value, value)
        ax.errorbar(
            [value], [y], xerr=[[value - low], [high - value]], fmt="o", color=color, capsize=3, lw=1.5
        )
    claim = analysis["claim"]["value_pct"]
    ax.axvline(claim, color=CLAIM_COLOR, ls="--", lw=1.5, label=f"claim {fmt_pct(claim)}")
    echo = scorer_echo(analysis, metric)
    if echo is not None:
        ax.axvline(echo[0], color=ECHO_COLOR, ls=":", lw=1.5, label=f"prompt echo {fmt_pct(echo[0])}")
    ax.set_yticks(ys, [name + (" (verdict arm)" if name == rule.get("arm") else "") for name, _ in rows])
    for label, (name, _) in zip(ax.get_yticklabels(), rows, strict=True):
        if name == rule.get("arm"):
            label.set_fontweight("bold")
    _right_labels(ax, ys, [f"{fmt_pct(v)} {fmt_interval(i)}" for _, (v, i) in rows])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel(f"{metric} (%)")
    confidence = rule.get("confidence", 0.95)
    kind = rule.get("interval", "wilson") if metric.startswith("prompt_level") else "bootstrap"
    ax.set_title(
        f"{metric} per arm with {confidence:.0%} {kind.replace('_', '-')} intervals, against the claim"
    )
    _legend_below(fig, 2)
    ax.grid(axis="y", visible=False)
    return fig


def discordance_figure(analysis: Section) -> Figure | None:
    """Per paired comparison: b (passes in a only) and c (passes in b only), with p and the verdict."""
    comparisons = analysis.get("comparisons", {})
    if not comparisons:
        return None
    from matplotlib.ticker import MaxNLocator

    names = list(comparisons)
    fig = _figure(len(names) * 2, 1.4)
    ax = fig.add_subplot()
    ys = [2.0 * i for i in range(len(names))][::-1]
    bs = [comparisons[n]["b"] for n in names]
    cs = [comparisons[n]["c"] for n in names]
    ax.barh([y + 0.4 for y in ys], bs, height=0.8, color=B_COLOR, label="b: passes in a only")
    ax.barh([y - 0.4 for y in ys], cs, height=0.8, color=C_COLOR, label="c: passes in b only")
    ax.set_yticks(
        ys,
        [f"{n}\n{comparisons[n]['arms'][0]} (a)\nvs {comparisons[n]['arms'][1]} (b)" for n in names],
        fontsize=8,
    )
    _right_labels(
        ax,
        ys,
        [
            f"b {b}, c {c}\np {fmt_p(comparisons[n]['p_value'])}\n{comparisons[n]['verdict'].upper()}"
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
    _legend_below(fig, 2)
    ax.grid(axis="y", visible=False)
    return fig


def _generation_lengths(run_dir: Path, arm: str) -> list[int]:
    rows = read_jsonl_complete(RunDir(run_dir).generations(arm))
    return [int(row.get("n_output_tokens", 0)) for row in rows]


def lengths_figure(analysis: Section, run_dir: Path) -> Figure | None:
    """Distribution of output tokens per arm (box: quartiles, whiskers: min and max) with each arm's
    token cap marked; read from generations/<arm>.jsonl."""
    rows = [
        (name, lengths, arm["settings"].get("max_new_tokens"))
        for name, arm in analysis["arms"].items()
        if (lengths := _generation_lengths(run_dir, name))
    ]
    if not rows:
        return None
    fig = _figure(len(rows), 1.6)
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    ax.boxplot(
        [lengths for _, lengths, _ in rows],
        positions=ys,
        orientation="horizontal",
        whis=(0, 100),
        widths=0.55,
        patch_artist=True,
        boxprops={"facecolor": "#d6eaf8"},
        medianprops={"color": "black"},
    )
    for y, (_, _, cap) in zip(ys, rows, strict=True):
        if cap:
            ax.plot([cap, cap], [y - 0.4, y + 0.4], color=CAP_COLOR, lw=2.5, solid_capstyle="butt")
    ax.plot([], [], color=CAP_COLOR, lw=2.5, label="token cap (max_new_tokens)")
    ax.set_yticks(ys, [name for name, _, _ in rows])
    analysis_arms = analysis["arms"]
    _right_labels(
        ax,
        ys,
        [
            f"median {fmt_num(analysis_arms[name].get('tokens', {}).get('median'))}, "
            f"{analysis_arms[name].get('truncation', {}).get('truncated', 0)}/{len(lengths)} at cap"
            for name, lengths, _ in rows
        ],
    )
    ax.set_xlim(left=0)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel("output tokens per response")
    ax.set_title("Response lengths per arm (box: quartiles and median; whiskers: shortest and longest)")
    _legend_below(fig, 1)
    ax.grid(axis="y", visible=False)
    return fig


def _contrast_pairs(analysis: Section) -> list[tuple[str, Section]]:
    found = []
    for name, control in sorted(analysis.get("controls", {}).items()):
        if control.get("kind") in ("batch_size", "backend") and "skipped" not in control:
            found += [(name, pair) for pair in control.get("pairs", [])]
    return found


def divergence_figure(analysis: Section) -> Figure | None:
    """Cumulative share of prompts whose outputs have diverged by each index, per batch-size and
    backend contrast pair (identical outputs never diverge, so a curve tops out below 100%)."""
    pairs = _contrast_pairs(analysis)
    if not pairs:
        return None
    diverged = any(p["first_divergence"].get("n") for _, p in pairs)
    fig = _figure(6 if diverged else len(pairs) + 2, 1.6)
    ax = fig.add_subplot()
    labels = [
        f"{name}: {p['arms'][0]} vs {p['arms'][1]} ({p['identical']}/{p['n_common']} byte-identical)"
        for name, p in pairs
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
    top = max(p["first_divergence"]["max"] or 0 for _, p in pairs)
    units = {
        divergence_text(p["first_divergence"]).split(" ")[0]
        for _, p in pairs
        if p["first_divergence"].get("n")
    }
    for label, (_, pair) in zip(labels, pairs, strict=True):
        indices, n = pair["first_divergence"].get("indices", []), max(pair["n_common"], 1)
        xs = [0, *indices, top * 1.05 + 1]
        ys = [0.0] + [100.0 * (i + 1) / n for i in range(len(indices))] + [100.0 * len(indices) / n]
        ax.step(xs, ys, where="post", lw=1.6, label=label)
    ax.set_ylim(-2, 102)
    ax.set_xlim(0, top * 1.05 + 1)
    unit = units.pop() if len(units) == 1 else "token"
    ax.set_xlabel(f"first differing {unit} index (0 = the first generated {unit})")
    ax.set_ylabel("prompts diverged (% of common)")
    _legend_below(fig, 1)
    return fig


def scorer_figure(analysis: Section) -> Figure | None:
    """Per metric: the scorer's letter band, each unseeded run's value and the seeded value."""
    from capsule.report.formatting import METRIC_LABELS, in_metric_order

    controls = [
        (n, c)
        for n, c in sorted(analysis.get("controls", {}).items())
        if c.get("kind") == "scorer_stability" and "metrics" in c
    ]
    if not controls:
        return None
    name, control = controls[0]
    metrics = in_metric_order(control["metrics"])
    band = (control.get("band") or {}).get("metrics") or {}
    bands = {m: (100 * band[m]["low"], 100 * band[m]["high"]) for m in metrics if m in band}
    points = [v for m in metrics for v in (control["metrics"][m].get("values_pct") or [])]
    points += [v for pair in bands.values() for v in pair]
    points += [v for m in metrics if (v := control["metrics"][m].get("seeded_pct")) is not None]
    low_x, high_x = min(points, default=0.0), max(points, default=100.0)
    pad = max(1.0, 0.08 * (high_x - low_x))
    fig = _figure(len(metrics), 1.6)
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
        entry = control["metrics"][metric]
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
        values = entry.get("values_pct") or []
        ax.plot(values, [y] * len(values), "x", color=ARM_COLOR, ms=8, mew=1.5, label=once("unseeded run"))
        if entry.get("seeded_pct") is not None:
            ax.plot(
                [entry["seeded_pct"]],
                [y],
                "D",
                mfc="none",
                color=PRIMARY_COLOR,
                ms=7,
                mew=1.5,
                label=once("seeded (reported)"),
            )
        band_text = (
            f"; band {fmt_interval({'low_pct': bands[metric][0], 'high_pct': bands[metric][1]})}"
            if metric in bands
            else ""
        )
        labels.append(f"spread {fmt_pct(entry.get('spread_pct'))}{band_text}")
    ax.set_yticks(ys, [METRIC_LABELS.get(m, m) for m in metrics])
    _right_labels(ax, ys, labels)
    ax.set_ylim(-0.7, len(metrics) - 0.3)
    ax.set_xlabel("score (%)")
    ax.set_title(f"Scorer spread on {control['arms'][0]}: {control.get('k', 0)} unseeded runs ({name})")
    _legend_below(fig, 3)
    ax.grid(axis="y", visible=False)
    return fig


#: Plot file name -> builder(analysis, run_dir); None from a builder means "nothing to plot".
PLOTS: dict[str, Callable[[Section, Path], Figure | None]] = {
    "arms.png": lambda analysis, run_dir: arms_figure(analysis),
    "lengths.png": lengths_figure,
    "discordance.png": lambda analysis, run_dir: discordance_figure(analysis),
    "divergence.png": lambda analysis, run_dir: divergence_figure(analysis),
    "scorer.png": lambda analysis, run_dir: scorer_figure(analysis),
}


def render_plots(analysis: Section, run_dir: Path) -> dict[str, bytes]:
    """Every plot there is data for, as `{file name: PNG bytes}`."""
    import matplotlib
    import matplotlib.style

    out: dict[str, bytes] = {}
    with matplotlib.style.context("default"), matplotlib.rc_context(RC):  # type: ignore[arg-type]
        for name, build in PLOTS.items():
            figure = build(analysis, run_dir)
            if figure is not None:
                out[name] = png_bytes(figure)
    return out


def write_plots(run_dir: Path, analysis: Section) -> list[Path]:
    """Write `run_dir/plots/*.png` and remove stale ones of the same names; return the paths written."""
    rendered = render_plots(analysis, run_dir)
    written = []
    for name in PLOTS:
        path = RunDir(run_dir).plot(name)
        if name in rendered:
            write_bytes_atomic(path, rendered[name])
            written.append(path)
        elif path.exists():
            path.unlink()
    return written
