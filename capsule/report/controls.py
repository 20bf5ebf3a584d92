"""The Controls section of RESULTS.md: each control as a bold heading line, its sentences and table.

The order, the titles and the renderer of each kind come from `capsule.prereg.control_kinds`; the
renderers live in `capsule.report.generation_controls` (rerun identity, batch-size and backend
contrasts, seed vs batch) and `capsule.report.scorer_controls` (scorer stability and sanity).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from capsule.analysis.control_schema import ControlSection, SkippedControl
from capsule.analysis.schema import Analysis
from capsule.prereg.control_kinds import KINDS, resolve

Renderer = Callable[[ControlSection, Analysis], list[str]]
_RANK = {kind.name: index for index, kind in enumerate(KINDS)}
_BY_NAME = {kind.name: kind for kind in KINDS}


def in_control_order(controls: Mapping[str, ControlSection]) -> list[str]:
    """Control names ordered by kind (as `capsule.prereg.control_kinds.KINDS`), then by name."""
    return sorted(controls, key=lambda n: (_RANK.get(controls[n].kind, len(_RANK)), n))


def _head(name: str, control: ControlSection) -> str:
    kind = _BY_NAME.get(control.kind)
    head = f"**{name}** ({kind.title if kind else control.kind})"
    if control.failures:
        head += ": FAILED: " + "; ".join(control.failures)
    description = str(control.description or "").strip()
    return head + (f". {description}" if description else "")


def control_lines(name: str, control: ControlSection, analysis: Analysis) -> list[str]:
    """One control as a bold heading line followed by its sentences and table."""
    head = _head(name, control)
    if isinstance(control, SkippedControl):
        if control.refused:  # a refused arm is a result: the control was not run, and says why
            return [f"{head}: {control.skipped}."]
        return [f"{head}: skipped ({control.skipped})."]
    kind = _BY_NAME.get(control.kind)
    if kind is None:
        return [f"{head}: no renderer for this kind; see analysis.json."]
    renderer: Renderer = resolve(kind.renderer)
    return [head, ""] + renderer(control, analysis)
