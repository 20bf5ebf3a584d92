"""The plots' fixed canvas: figure size, style, colours, PNG bytes without a version stamp.

Figures are drawn with matplotlib's Agg canvas (no pyplot state, no backend selection), under
matplotlib's default style plus the fixed `RC` below (DejaVu Sans, which ships with matplotlib),
at a fixed DPI and width, and saved without the PNG `Software` stamp, so the bytes depend only on
the inputs and the matplotlib/freetype versions (recorded in the manifest). matplotlib is imported
inside functions, so importing the report stays light.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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


def new_figure(rows: int, extra_in: float = 1.3) -> Figure:
    """A figure of the fixed width, `extra_in` inches plus one row height per row tall."""
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


def right_labels(ax: Any, positions: Sequence[float], labels: Sequence[str], size: float = 8) -> None:
    """Per-row annotations on a secondary y axis (laid out by constrained layout, never overlapping)."""
    side = ax.secondary_yaxis("right")
    side.set_yticks(list(positions), list(labels))
    side.tick_params(length=0, labelsize=size)


def legend_below(fig: Figure, ncols: int = 3) -> None:
    """The figure legend under the x axis label, outside the data."""
    fig.legend(loc="outside lower center", ncols=ncols, frameon=False)
