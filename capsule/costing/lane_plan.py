"""How a plan's arms are arranged on N lanes, for `capsule plan cost --lanes N`: which arms run in
which lane, each lane's minutes, and the critical path (the longest lane).

Two arrangements. Engine runs never split: arms that share a loaded backend stay in one lane, in
plan order. Split loads (the rule `capsule reproduce --lanes` follows,
`capsule.prereg.engine_sharing.lane_units` and `share_counts`): a transformers run is split into
its arms, each loading its own copy of the model (one more start each), and an arm longer than a
lane's share into batch shares, each with its own load; vLLM and server runs are never split.
Both are arithmetic on `PlanEstimate`, assuming lanes do not slow each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from capsule.costing.sizing import PlanEstimate, place_longest_first
from capsule.prereg.engine_sharing import Shard, gather_shares, share_counts, share_weight


@dataclass(frozen=True)
class Lane:
    """One lane: its arms (in plan order), the batch share of each it runs only part of, and its
    minutes, starts included."""

    arms: tuple[str, ...]
    minutes: float
    shards: tuple[tuple[str, Shard], ...] = ()

    def describe(self) -> str:
        """Its arms, a shared arm with its share, as `reproduce --lanes` names them."""
        shares = dict(self.shards)
        return ", ".join(f"{arm} ({shares[arm].label()})" if arm in shares else arm for arm in self.arms)


@dataclass(frozen=True)
class Arrangement:
    """Every lane of one arrangement."""

    lanes: tuple[Lane, ...]
    split_loads: bool

    @property
    def minutes(self) -> float:
        """The longest lane's minutes: the study's wall time under this arrangement."""
        return max(lane.minutes for lane in self.lanes)

    @property
    def critical(self) -> Lane:
        """The longest lane (the first of equals)."""
        return max(self.lanes, key=lambda lane: lane.minutes)


Unit = tuple[tuple[str, ...], Shard | None, float]  # arm names, batch share (None: whole), minutes


def _units(estimate: PlanEstimate, lanes: int, split_loads: bool, most: bool) -> list[Unit]:
    """The arrangement's units of work: engine runs, or with `split_loads`, the units
    `reproduce --lanes` places (`PlanEstimate.units`, long transformers arms cut into batch shares
    by `share_counts` on the expected minutes), each paying its own start."""
    if not split_loads:
        return [(run, None, estimate.run_minutes(run, most)) for run in estimate.runs]
    units = estimate.units
    minutes = [estimate.run_minutes(unit) for unit in units]
    starts = [estimate.device.start_s[estimate.arm(unit[0]).backend] / 60.0 for unit in units]
    shareable = dict(estimate.shareable)
    batches = [shareable.get(unit[0], 1) if len(unit) == 1 else 1 for unit in units]
    can_split = [len(unit) == 1 and unit[0] in shareable for unit in units]
    counts = share_counts(minutes, starts, batches, can_split, lanes)
    out: list[Unit] = []
    for unit, start, n_batches, count in zip(units, starts, batches, counts, strict=True):
        weight = estimate.run_minutes(unit, most)
        if count == 1:
            out.append((unit, None, weight))
        else:
            out.extend(
                (unit, shard, share_weight(weight, start, n_batches, shard))
                for shard in (Shard((index,), count) for index in range(count))
            )
    return out


def splits_anything(estimate: PlanEstimate) -> bool:
    """Whether splitting loads changes any unit (a transformers run of more than one arm, or an
    arm lanes may cut into batch shares); else both arrangements agree."""
    return estimate.units != estimate.runs or any(n > 1 for _, n in estimate.shareable)


def arrange(estimate: PlanEstimate, lanes: int, split_loads: bool, most: bool = False) -> Arrangement:
    """The units placed longest first on the least loaded of `lanes` lanes (by minutes expected, or
    at most with `most`; batch shares are cut by the expected minutes either way)."""
    units = _units(estimate, lanes, split_loads, most)
    kinds = [estimate.arm(unit[0]).hardware for unit, _, _ in units]
    placed = place_longest_first([minutes for _, _, minutes in units], lanes, kinds)
    order = [arm.arm for arm in estimate.arms]
    arranged = []
    for lane in placed:
        names = {name for i in lane for name in units[i][0]}
        shares = gather_shares([(units[i][0][0], units[i][1]) for i in lane])
        arranged.append(
            Lane(
                tuple(sorted(names, key=order.index)), sum(units[i][2] for i in lane),
                tuple(sorted(shares.items())),
            )
        )
    return Arrangement(tuple(arranged), split_loads)
