"""The control kinds a plan may declare: one row per kind, read by every layer that handles controls.

A row says how many arms the kind reads, which arm fields may differ between them, which keys its
`[[controls]]` table takes, its title in the report, and where its code lives: a kind-specific
plan check, the analysis runner, the section type analysis.json records it as (and is decoded by)
and the report renderer, as lazy "module:function" targets (like the backend registry) so that this
module, at the bottom of the stack, imports no layer above it. The loader, `capsule.prereg.checks`,
`capsule.analysis.derive`, `capsule.analysis.codec` and `capsule.report.controls` all read this
table; adding a kind is one row here plus the functions and section it names.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from capsule.errors import BadInputError


@dataclass(frozen=True)
class ControlKind:
    """One kind of control and everything the other layers need to know about it."""

    name: str
    arms: tuple[int, int]  # (fewest, most) arms a control of this kind reads
    may_differ: tuple[str, ...] | None  # arm fields that may differ; None: no "same except" check
    keys: tuple[str, ...]  # required keys of its [[controls]] table
    optional: tuple[str, ...]  # optional keys of its table
    title: str  # as the report names the kind
    runner: str  # "module:function" (control, inputs) -> section, in capsule.analysis
    section: str  # "module:Class": the section type its runner returns, which analysis.json decodes by kind
    renderer: str  # "module:function" (section, analysis) -> Markdown lines, in capsule.report
    check: str | None = None  # "module:function" (plan, where, control, arms) -> None, in capsule.prereg

    def takes(self, key: str) -> bool:
        """Whether this kind's table may hold `key` (required or optional)."""
        return key in self.keys or key in self.optional


_GENERATION_KEYS = ("name", "kind", "arms")
_CHECKS = "capsule.prereg.checks"
_RUNNERS = "capsule.analysis.controls"
_SECTIONS = "capsule.analysis.control_schema"
_SCORER_RUNNERS = "capsule.analysis.scorer_controls"
_RENDERERS = "capsule.report.generation_controls"
_SCORER_RENDERERS = "capsule.report.scorer_controls"

#: Every kind, in the order the report shows them: generation determinism first, then the scorer.
KINDS: tuple[ControlKind, ...] = (
    ControlKind(
        name="rerun_identity",
        arms=(2, 2),
        may_differ=(),
        keys=_GENERATION_KEYS,
        optional=("description",),
        title="rerun identity",
        runner=f"{_RUNNERS}:rerun_identity",
        section=f"{_SECTIONS}:RerunSection",
        renderer=f"{_RENDERERS}:render_rerun",
    ),
    ControlKind(
        name="batch_size",
        arms=(2, 99),
        may_differ=("batch_size",),
        keys=_GENERATION_KEYS,
        optional=("description",),
        title="batch-size contrast",
        runner=f"{_RUNNERS}:setting_contrast",
        section=f"{_SECTIONS}:ContrastSection",
        renderer=f"{_RENDERERS}:render_contrast",
        check=f"{_CHECKS}:check_batch_sizes",
    ),
    ControlKind(
        name="backend",
        arms=(2, 2),
        may_differ=("backend", "backend_options", "env"),
        keys=_GENERATION_KEYS,
        optional=("description",),
        title="backend contrast",
        runner=f"{_RUNNERS}:setting_contrast",
        section=f"{_SECTIONS}:ContrastSection",
        renderer=f"{_RENDERERS}:render_contrast",
        check=f"{_CHECKS}:check_backends",
    ),
    ControlKind(
        name="cross_device",
        arms=(2, 2),
        may_differ=("backend_options", "hardware"),
        keys=_GENERATION_KEYS,
        optional=("description",),
        title="cross-device contrast",
        runner=f"{_RUNNERS}:setting_contrast",
        section=f"{_SECTIONS}:ContrastSection",
        renderer=f"{_RENDERERS}:render_contrast",
        check=f"{_CHECKS}:check_devices",
    ),
    ControlKind(
        name="seed_vs_batch",
        arms=(4, 99),
        may_differ=("seed", "batch_size"),
        keys=_GENERATION_KEYS,
        optional=("description",),
        title="seed vs batch size",
        runner=f"{_RUNNERS}:seed_vs_batch",
        section=f"{_SECTIONS}:SeedVsBatchSection",
        renderer=f"{_RENDERERS}:render_seed_vs_batch",
        check=f"{_CHECKS}:check_seed_grid",
    ),
    ControlKind(
        name="scorer_stability",
        arms=(1, 1),
        may_differ=None,
        keys=("name", "kind", "arms", "k"),
        optional=("description",),
        title="scorer stability",
        runner=f"{_SCORER_RUNNERS}:run_scorer_stability",
        section=f"{_SECTIONS}:StabilitySection",
        renderer=f"{_SCORER_RENDERERS}:render_stability",
    ),
    ControlKind(
        name="scorer_sanity",
        arms=(0, 0),
        may_differ=None,
        keys=("name", "kind", "compliant"),
        optional=("arms", "description"),
        title="scorer sanity",
        runner=f"{_SCORER_RUNNERS}:run_scorer_sanity",
        section=f"{_SECTIONS}:SanitySection",
        renderer=f"{_SCORER_RENDERERS}:render_sanity",
        check=f"{_CHECKS}:check_compliant",
    ),
)

#: The kind names, as the loader accepts them.
CONTROL_KINDS: tuple[str, ...] = tuple(kind.name for kind in KINDS)
_BY_NAME = {kind.name: kind for kind in KINDS}


def control_kind(name: str) -> ControlKind:
    """The row of kind `name`; BadInputError naming the known kinds for any other name."""
    kind = _BY_NAME.get(name)
    if kind is None:
        raise BadInputError(f"unknown control kind {name!r}; known kinds: {', '.join(CONTROL_KINDS)}")
    return kind


def resolve(target: str) -> Any:
    """The function (or class) a "module:function" target names, imported on first use."""
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)
