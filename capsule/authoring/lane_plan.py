"""How a plan's arms are arranged on N lanes, for `capsule plan cost --lanes N`: which arms run in
which lane, each lane's minutes, and the critical path (the longest lane).

Two arrangements. Engine runs never split: arms that share a loaded backend stay in one lane, in
plan order. Split loads (the rule `capsule reproduce --lanes` follows,
`capsule.prereg.engine_sharing.lane_units`): a transformers run is split into its arms, each
loading its own copy of the model (one more start each); vLLM and server runs are never split.
Both are arithmetic on `PlanEstimate`, assuming lanes do not slow each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from capsule.authoring.sizing import PlanEstimate, place_longest_first


@dataclass(frozen=True)
class Lane:
    """One lane: its arms (in plan order) and its minutes, starts included."""

    arms: tuple[str, ...]
    minutes: float


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


def _units(estimate: PlanEstimate, split_loads: bool, most: bool) -> list[tuple[tuple[str, ...], float]]:
    """The arrangement's units of work (arm names, minutes): engine runs, or with `split_loads`, the
    units `reproduce --lanes` places (`PlanEstimate.units`), each paying its own start."""
    units = estimate.units if split_loads else estimate.runs
    return [(unit, estimate.run_minutes(unit, most)) for unit in units]


def splits_anything(estimate: PlanEstimate) -> bool:
    """Whether splitting loads changes any unit (a transformers run of more than one arm); else both
    arrangements agree."""
    return estimate.units != estimate.runs


def arrange(estimate: PlanEstimate, lanes: int, split_loads: bool, most: bool = False) -> Arrangement:
    """The units placed longest first on the least loaded of `lanes` lanes (by minutes expected, or
    at most with `most`)."""
    units = _units(estimate, split_loads, most)
    placed = place_longest_first([minutes for _, minutes in units], lanes)
    return Arrangement(
        tuple(
            Lane(tuple(name for i in lane for name in units[i][0]), sum(units[i][1] for i in lane))
            for lane in placed
        ),
        split_loads,
    )
