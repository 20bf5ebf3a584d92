"""A plan's estimated cost as printed lines: the table `capsule plan cost` prints, and `capsule
reproduce` prints on a GPU before the first arm. One place for the layout and the sources."""

from __future__ import annotations

from capsule.authoring.devices import TABLE, DeviceTable
from capsule.authoring.sizing import PlanEstimate


def _minutes(value: float) -> str:
    return f"{value:.1f}"


def cost_lines(estimate: PlanEstimate, label: str, lanes: int) -> list[str]:
    """The per-arm table, the totals (sequential and with `lanes` lanes, with their arithmetic) and
    every source, numbered, that a figure rests on."""
    device = estimate.device
    sources: list[str] = []

    def note(source: str) -> int:
        if source not in sources:
            sources.append(source)
        return sources.index(source) + 1

    lines = [
        f"{label} on {device.name} ({device.description}); minutes of generation per arm, "
        "a backend start where an arm needs a new one",
        f"{'arm':<26} {'backend':<7} {'prompts':>7} {'budget':>6} {'expected':>10} {'at most':>10} "
        f"{'tok/s':>8} {'start s':>7} {'min exp':>8} {'min most':>8}  src",
    ]
    for arm in estimate.arms:
        refs = f"[{note(arm.length_source)},{note(arm.throughput_source)}]"
        lines.append(
            f"{arm.arm:<26} {arm.backend:<7} {arm.prompts:>7} {arm.budget:>6} {arm.tokens_expected:>10,} "
            f"{arm.tokens_most:>10,} {arm.tok_per_s:>8.1f} {arm.start_s:>7.0f} "
            f"{_minutes(arm.minutes_expected):>8} {_minutes(arm.minutes_most):>8}  {refs}"
        )
    starts = sum(a.start_s for a in estimate.arms) / 60.0
    generation = sum(a.minutes_expected for a in estimate.arms)
    most = sum(a.minutes_most for a in estimate.arms)
    lines.append(
        f"sequential: {_minutes(generation)} + {_minutes(starts)} (starts) = "
        f"{_minutes(estimate.sequential())} min expected, at most {_minutes(most)} + {_minutes(starts)} = "
        f"{_minutes(estimate.sequential(most=True))} min ({len(estimate.runs)} backend starts)"
    )
    runs = len(estimate.runs)
    lines.append(
        f"with {lanes} lane(s): {_minutes(estimate.with_lanes(lanes))} min expected, at most "
        f"{_minutes(estimate.with_lanes(lanes, most=True))} min (arithmetic: {runs} engine runs, "
        "never split, placed longest first on the least loaded lane; assumes lanes do not slow each other)"
    )
    lines.append(f"backend starts: {device.start_source}")
    lines.extend(f"[{i}] {source}" for i, source in enumerate(sources, start=1))
    return lines


def device_lines(table: DeviceTable) -> list[str]:
    """The device table, for `--gpu help`: each device, its figures and their sources."""
    lines = [f"devices (capsule/{TABLE.parent.name}/{TABLE.name}):"]
    for device in table.devices:
        starts = ", ".join(f"{k} {v:g} s" for k, v in device.start_s.items())
        lines.append(
            f"{device.name:<16} {device.kind}  {device.description} (matches {device.match!r}); "
            f"starts: {starts}"
        )
        for f in device.figures:
            lines.append(
                f"    {f.backend:<5} {f.dtype:<9} batch {f.batch:>3}: {f.tok_per_s:>8.1f} tok/s  {f.source}"
            )
    for s in table.slowdowns:
        lines.append(
            f"slowdown on {s.kind}: {s.env}={s.value} divides throughput by {s.factor:g} ({s.source})"
        )
    return lines
