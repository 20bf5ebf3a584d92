"""A plan's estimated cost as printed lines: the table `capsule plan cost` prints, and `capsule
reproduce` prints on a GPU before the first arm. One place for the layout and the sources."""

from __future__ import annotations

from capsule.costing.devices import TABLE, DeviceTable
from capsule.costing.lane_plan import Arrangement, arrange, splits_anything
from capsule.costing.sizing import PlanEstimate


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

    gpus = f", {estimate.gpu_count} GPU(s)" if device.kind == "gpu" else ""
    lines = [
        f"{label} on {device.name} ({device.description}{gpus}); minutes of generation per arm, "
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
    lines.append("arithmetic (expected):")
    lines.extend(f"  {arm.arm:<26} {arm.arithmetic}" for arm in estimate.arms)
    starts = sum(a.start_s for a in estimate.arms) / 60.0
    generation = sum(a.minutes_expected for a in estimate.arms)
    most = sum(a.minutes_most for a in estimate.arms)
    lines.append(
        f"sequential: {_minutes(generation)} + {_minutes(starts)} (starts) = "
        f"{_minutes(estimate.sequential())} min expected, at most {_minutes(most)} + {_minutes(starts)} = "
        f"{_minutes(estimate.sequential(most=True))} min ({len(estimate.runs)} backend starts)"
    )
    lines.extend(_lane_lines(estimate, lanes))
    lines.append(f"backend starts: {device.start_source}")
    lines.extend(f"[{i}] {source}" for i, source in enumerate(sources, start=1))
    return lines


def _arrangement_line(name: str, lanes: int, expected: Arrangement, most: Arrangement) -> str:
    return (
        f"with {lanes} lane(s), {name}: {_minutes(expected.minutes)} min expected, "
        f"at most {_minutes(most.minutes)} min"
    )


def _lane_lines(estimate: PlanEstimate, lanes: int) -> list[str]:
    """The with-lanes totals (engine runs never split; and each transformers arm loading its own
    model, where that differs), the arrangement of the shorter one lane by lane, and its critical path."""
    whole = arrange(estimate, lanes, split_loads=False)
    lines = [
        _arrangement_line(
            f"{len(estimate.runs)} engine runs never split",
            lanes, whole, arrange(estimate, lanes, False, most=True),
        )
    ]
    best = whole
    if splits_anything(estimate):
        split = arrange(estimate, lanes, split_loads=True)
        load = estimate.device.start_s["hf"]
        lines.append(
            _arrangement_line(
                f"each transformers arm loading its own model (+{load:g} s a load), a long one "
                "cut into batch shares (as `capsule reproduce --lanes` places them)",
                lanes, split, arrange(estimate, lanes, True, most=True),
            )
        )
        best = split if split.minutes < whole.minutes else whole
    if lanes > 1:
        lines.append(
            "arrangement (" + ("split loads" if best.split_loads else "engine runs never split")
            + "), minutes expected per lane, longest first on the least loaded lane:"
        )
        lines.extend(
            f"  lane {i}: {lane.minutes:6.1f}  {lane.describe() or '(empty)'}"
            for i, lane in enumerate(best.lanes, start=1)
        )
        critical = best.critical
        shares, batches = dict(critical.shards), dict(estimate.shareable)

        def here(name: str) -> float:  # the arm's generation minutes on this lane (its share's part)
            part = shares[name].batches(batches[name]) / batches[name] if name in shares else 1.0
            return estimate.arm(name).minutes_expected * part

        longest = max(critical.arms, key=here)
        share = f" ({shares[longest].label()})" if longest in shares else ""
        lines.append(
            f"critical path: lane {best.lanes.index(critical) + 1}, {_minutes(critical.minutes)} min "
            f"(its longest arm {longest}{share}: {_minutes(here(longest))} min of generation); assumes "
            "lanes do not slow each other (unmeasured on a GPU; lanes on one GPU: see doctor --lanes "
            "for memory)"
        )
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
