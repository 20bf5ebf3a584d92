"""A device priced from what a probe measured (`capsule reproduce --probe K`), so that the full
study's cost on this host rests on its own step times, not on the table's estimates alone.

A probe runs every arm on its first K prompts; each arm gives one timing: rows generated together,
steps and generation seconds (`capsule.pipeline.probe_run.arm_timings` says how they are read).
Per backend row (`BackendSpec.priced_as`) and dtype:
- where the table has figures for the host (`match_host`), every one of them is scaled by the
  median ratio of the probe's step times to the table's at the batch sizes the probe ran
  (`step_seconds`, the table's own rule): K prompts fill only small batches, and the table says
  how a step grows with the batch;
- where it has none, the probe's figures are the device's, priced by the same rule (beyond the
  measured batch sizes it extrapolates, which the source says).
Rows the probe did not run keep the table's figures. Backend starts are the probe's measured loads
(median per backend), else the table's.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from capsule.costing.devices import Device, Figure, step_seconds
from capsule.prereg.backend_specs import SPECS

START_KEYS = ("vllm", "server", "hf")  # a device's start_s keys (throughput.toml)


@dataclass(frozen=True)
class ArmTiming:
    """One arm a probe generated: at most `rows` sequences together, `steps` steps, `seconds`."""

    arm: str
    backend: str  # the arm's backend (priced as `SPECS[backend].priced_as`)
    dtype: str
    rows: int
    steps: int
    seconds: float

    @property
    def step_s(self) -> float:
        """Seconds per step (prefill included: it is part of what an arm costs)."""
        return self.seconds / max(1, self.steps)


@dataclass(frozen=True)
class Measured:
    """Every arm timing of a probe, and every backend load it made: (backend, seconds)."""

    arms: tuple[ArmTiming, ...]
    loads: tuple[tuple[str, float], ...]


def _priced_as(backend: str) -> str:
    return SPECS[backend].priced_as or backend


def _measured_figures(timings: list[ArmTiming]) -> list[Figure]:
    """One figure per batch size the probe ran: the median step time of its arms there."""
    figures = []
    for rows in sorted({t.rows for t in timings}):
        at = [t for t in timings if t.rows == rows]
        step = statistics.median(t.step_s for t in at)
        arms = ", ".join(sorted({t.arm for t in at}))
        figures.append(Figure(
            _priced_as(at[0].backend), at[0].dtype, rows, rows / step,
            f"probe: median step time {step * 1000:.1f} ms of {len(at)} arm(s) at {rows} row(s) ({arms})",
        ))
    return figures


def _calibrated(base: Device, table_figures: list[Figure], measured: list[Figure]) -> list[Figure]:
    """`table_figures` scaled by the median ratio of the probe's step times to the table's."""
    ratios = [
        (m.batch / m.tok_per_s) / step_seconds(table_figures, m.batch) for m in measured
    ]
    ratio = statistics.median(ratios)
    at = ", ".join(str(m.batch) for m in measured)
    return [
        Figure(f.backend, f.dtype, f.batch, f.tok_per_s / ratio,
               f"probe-calibrated: {base.name}'s figure at batch {f.batch} with step time x {ratio:.3g} "
               f"(the probe's step time over the table's, median at batch {at}; {f.source})")
        for f in table_figures
    ]


def measured_device(measured: Measured, base: Device | None, kind: str) -> Device:
    """The device this host is, as the probe measured it (see the module docstring). `base`: the
    table's device the host matches, or None; `kind`: "gpu" or "cpu"."""
    groups: dict[tuple[str, str], list[ArmTiming]] = {}
    for timing in measured.arms:
        groups.setdefault((_priced_as(timing.backend), timing.dtype), []).append(timing)
    base_figures = list(base.figures) if base is not None else []
    figures: list[Figure] = []
    for key in sorted(set(groups) | {(f.backend, f.dtype) for f in base_figures}):
        table = sorted((f for f in base_figures if (f.backend, f.dtype) == key), key=lambda f: f.batch)
        probe = _measured_figures(groups.get(key, []))
        if base is not None and table and probe:
            figures += _calibrated(base, table, probe)
        else:
            figures += probe or table
    starts, said = _starts(measured.loads, base)
    name = f"{base.name} (probe)" if base is not None else f"this host's {kind} (probe)"
    description = (
        f"{base.description}, step times calibrated by this probe" if base is not None
        else "no device of the table matches this host: the probe's figures alone"
    )
    return Device(name, kind, "", description, starts, said, tuple(figures))


def _starts(loads: Iterable[tuple[str, float]], base: Device | None) -> tuple[dict[str, float], str]:
    """Start seconds per backend: the probe's median load where it loaded one, else the table's."""
    seen: dict[str, list[float]] = {}
    for backend, seconds in loads:
        seen.setdefault(backend, []).append(seconds)
    starts, parts = {}, []
    for key in START_KEYS:
        if key in seen:
            starts[key] = statistics.median(seen[key])
            parts.append(f"{key} {starts[key]:.1f} s (median of {len(seen[key])} load(s))")
        else:
            starts[key] = base.start_s[key] if base is not None else 0.0
    where = f"others from the table ({base.start_source})" if base is not None else "others not measured (0)"
    return starts, f"probe: measured {'; '.join(parts) or 'no load'}; {where}"
