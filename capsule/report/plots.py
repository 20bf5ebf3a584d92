"""The report's plots, as PNG files under `RUN_DIR/plots/`, byte-identical for identical inputs.

Each figure is a function of analysis.json (`capsule.analysis.schema.Analysis`): the arms and
comparisons in `capsule.report.score_figures`, the controls in `capsule.report.control_figures`,
drawn on the fixed canvas of `capsule.report.canvas`. The response-length plot, here, also reads
the `n_output_tokens` of `generations/<arm>.jsonl` (analysis.json holds only summary statistics of
lengths).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from capsule.analysis.schema import Analysis
from capsule.jsonio import read_jsonl_complete
from capsule.report.canvas import CAP_COLOR, RC, legend_below, new_figure, png_bytes, right_labels
from capsule.report.control_figures import divergence_figure, scorer_figure
from capsule.report.formatting import fmt_num
from capsule.report.score_figures import arms_figure, discordance_figure
from capsule.run_dir import RunDir

if TYPE_CHECKING:  # matplotlib is imported inside functions, so `import capsule.report.plots` stays light
    from matplotlib.figure import Figure


def _generation_lengths(run_dir: Path, arm: str) -> list[int]:
    rows = read_jsonl_complete(RunDir(run_dir).generations(arm))
    return [int(row.get("n_output_tokens", 0)) for row in rows]


def lengths_figure(analysis: Analysis, run_dir: Path) -> Figure | None:
    """Distribution of output tokens per arm (box: quartiles, whiskers: min and max) with each arm's
    token cap marked; read from generations/<arm>.jsonl."""
    rows = [
        (name, lengths, arm.settings.max_new_tokens)
        for name, arm in analysis.arms.items()
        if (lengths := _generation_lengths(run_dir, name))
    ]
    if not rows:
        return None
    fig = new_figure(len(rows), 1.6)
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
    analysis_arms = analysis.arms
    right_labels(
        ax,
        ys,
        [
            f"median {fmt_num(analysis_arms[name].tokens.median)}, "
            f"{analysis_arms[name].truncation.truncated}/{len(lengths)} at cap"
            for name, lengths, _ in rows
        ],
    )
    ax.set_xlim(left=0)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel("output tokens per response")
    ax.set_title("Response lengths per arm (box: quartiles and median; whiskers: shortest and longest)")
    legend_below(fig, 1)
    ax.grid(axis="y", visible=False)
    return fig


#: Plot file name -> builder(analysis, run_dir); None from a builder means "nothing to plot".
PLOTS: dict[str, Callable[[Analysis, Path], Figure | None]] = {
    "arms.png": lambda analysis, run_dir: arms_figure(analysis),
    "lengths.png": lengths_figure,
    "discordance.png": lambda analysis, run_dir: discordance_figure(analysis),
    "divergence.png": lambda analysis, run_dir: divergence_figure(analysis),
    "scorer.png": lambda analysis, run_dir: scorer_figure(analysis),
}


def render_plots(analysis: Analysis, run_dir: Path) -> dict[str, bytes]:
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
