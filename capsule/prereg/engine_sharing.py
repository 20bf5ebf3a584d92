"""Which arms share one loaded backend: the one rule that generation (one engine for consecutive
arms) and `capsule plan cost` (one start per such run of arms) both follow; and which arms must
stay together when arms run side by side (`lane_units`, for `reproduce --lanes` and `plan cost --lanes`),
and how a long transformers arm is cut into batch shards that run on lanes of their own (`split_units`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from capsule.errors import BadInputError
from capsule.pins import IFEVAL_PROMPTS_N
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.plan import Arm, Plan


def reuse_key(arm: Arm) -> tuple[Any, ...]:
    """Arms with equal keys can share one loaded backend; a different key needs a new instance.

    Load-time settings: backend, dtype, backend_options, env (read when the engine starts), the
    hardware it asks for (a cluster node's) and, for vLLM and a launched server, batch_size
    (max_num_seqs is fixed when the engine is built). hf takes
    the batch size per call, so hf arms differing only in batch size, decoding, seed or thinking share
    a model. The arm seed is not load-time: every backend seeds each request itself, and vLLM's
    engine is built with one fixed seed for all arms (`vllm.ENGINE_SEED`, recorded by its `describe()`).
    """
    batch = arm.batch_size if SPECS[arm.backend].on_vllm else None
    options = tuple(sorted((k, repr(v)) for k, v in arm.backend_options.items()))
    env = tuple(sorted(arm.env.items()))
    return (arm.backend, arm.dtype, options, env, batch, arm.hardware)


def engine_runs(arms: tuple[Arm, ...] | list[Arm]) -> list[list[Arm]]:
    """The plan's arms in order, cut where the reuse key changes: each run of arms is one backend
    start (generation loads one backend per run)."""
    runs: list[list[Arm]] = []
    for arm in arms:
        if runs and reuse_key(runs[-1][-1]) == reuse_key(arm):
            runs[-1].append(arm)
        else:
            runs.append([arm])
    return runs


@dataclass(frozen=True)
class Shard:
    """Part of one transformers arm: of its batches dealt round-robin into `count` shares by their
    position p in its execution order (`capsule.generation.batching.execution_order`), the shares
    `indices` (0-based, p % count). A batch's rows depend only on its composition and its rows'
    seeds, never on which process ran it or what ran beside it, so an arm's shards together write
    the rows of the arm run whole."""

    indices: tuple[int, ...]
    count: int

    def takes(self, position: int) -> bool:
        """Whether the batch at execution position `position` belongs to this shard."""
        return position % self.count in self.indices

    def batches(self, n_batches: int) -> int:
        """How many of an arm's `n_batches` batches this shard runs."""
        return sum(len(range(index, n_batches, self.count)) for index in self.indices)

    def joined(self, other: Shard) -> Shard:
        """This shard and `other` (of the same arm and count) as one: what one lane given both runs."""
        return Shard(tuple(sorted(set(self.indices) | set(other.indices))), self.count)

    def label(self) -> str:
        """How lanes and sidecars name it: "batch share 2/4" (the second of four), "1,3/4"."""
        return f"batch share {','.join(str(i + 1) for i in self.indices)}/{self.count}"


@dataclass(frozen=True)
class LaneUnit:
    """One unit a lane runs: an engine run's arms, or one shard of a single transformers arm."""

    arms: tuple[Arm, ...]
    shard: Shard | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The unit's arm names, plan order."""
        return tuple(arm.name for arm in self.arms)


def batch_count(plan: Plan, arm: Arm) -> int:
    """How many batches the arm forms from its subset (the last may be short): the most shares it
    can be cut into."""
    subset = plan.prompts.subsets[arm.subset]
    prompts = IFEVAL_PROMPTS_N if subset.rule == "all" else subset.n
    return -(-prompts // arm.batch_size)


def splittable(arm: Arm) -> bool:
    """Whether an arm may run as batch shards on several lanes: a transformers arm (one call per
    batch, each row its own random stream) without a wall-clock cap (which counts one arm's time,
    not several lanes' at once)."""
    return SPECS[arm.backend].static_batches and not arm.max_wall_minutes


def share_counts(
    weights: Sequence[float], starts: Sequence[float], batches: Sequence[int], can_split: Sequence[bool],
    lanes: int,
) -> list[int]:
    """Into how many batch shares each unit is cut: a unit that `can_split` (one transformers arm,
    `splittable`), whose weight (its start, `starts[i]`, plus its generation) exceeds a lane's
    fair share (the total over `lanes`), becomes ceil(weight / share) shares, at most its
    `batches[i]`; every other unit 1. The one rule of `reproduce --lanes` and `plan cost --lanes`;
    one lane splits nothing."""
    share = sum(weights) / max(1, lanes)
    counts = []
    for weight, start, n_batches, may in zip(weights, starts, batches, can_split, strict=True):
        long = lanes > 1 and may and weight - start > 0 and share > 0
        counts.append(max(1, min(n_batches, math.ceil(weight / share))) if long else 1)
    return counts


def share_weight(weight: float, start: float, n_batches: int, shard: Shard) -> float:
    """A share's weight: the whole start (each share loads its own model) and its part of the
    generation by batch count."""
    return start + (weight - start) * shard.batches(n_batches) / n_batches


def split_units(
    units: Sequence[LaneUnit], weights: Sequence[float], starts: Sequence[float],
    batches: Sequence[int], lanes: int,
) -> tuple[list[LaneUnit], list[float]]:
    """The units with each long transformers arm cut into batch shares (`share_counts`), and each
    unit's weight (`share_weight` for a share)."""
    can_split = [len(unit.arms) == 1 and splittable(unit.arms[0]) for unit in units]
    counts = share_counts(weights, starts, batches, can_split, lanes)
    out: list[LaneUnit] = []
    out_weights: list[float] = []
    for unit, weight, start, n_batches, count in zip(units, weights, starts, batches, counts, strict=True):
        if count == 1:
            out.append(unit)
            out_weights.append(weight)
            continue
        for index in range(count):
            shard = Shard((index,), count)
            out.append(LaneUnit(unit.arms, shard))
            out_weights.append(share_weight(weight, start, n_batches, shard))
    return out, out_weights


def gather_shares(placed: Sequence[tuple[str, Shard | None]]) -> dict[str, Shard]:
    """The batch share of each arm one lane runs only part of, from the (arm, share) pairs placed
    on it: two shares of one arm on one lane are one share; all of an arm's shares, the whole arm."""
    shards: dict[str, Shard] = {}
    for name, shard in placed:
        if shard is not None:
            shards[name] = shards[name].joined(shard) if name in shards else shard
    return {name: shard for name, shard in shards.items() if len(shard.indices) < shard.count}


def lane_units(arms: tuple[Arm, ...] | list[Arm]) -> list[list[Arm]]:
    """The units lanes place: each engine run, except that a transformers run is split into its
    arms, each loading its own copy of the model. Transformers arms share a model only to save the
    load (the batch size is per call, every row has its own random stream), so splitting changes
    no setting of any arm; a vLLM or server run stays whole, since its rerun controls share the base
    arm's engine by design."""
    units: list[list[Arm]] = []
    for run in engine_runs(arms):
        if SPECS[run[0].backend].static_batches:
            units.extend([arm] for arm in run)
        else:
            units.append(run)
    return units


def most_units(plan: Plan) -> int:
    """The most lanes the plan can keep busy: each engine run, with every transformers arm that
    may be split (`splittable`) cut into one share per batch."""
    runs = lane_units(plan.arms)
    return sum(batch_count(plan, run[0]) if len(run) == 1 and splittable(run[0]) else 1 for run in runs)


def check_lane_count(plan: Plan, count: int) -> None:
    """Refuse (BadInputError) a `--lanes` count below 1 or above the most units the plan can be cut
    into (`most_units`): the one lane-count rule of `reproduce --lanes` and `plan cost --lanes`."""
    if count < 1:
        raise BadInputError(f"--lanes {count}: at least 1 (1 runs the arms one after another)")
    most = most_units(plan)
    if count > most:
        raise BadInputError(
            f"--lanes {count}: plan {plan.name} has at most {most} units to run side by side "
            f"(engine runs, and the batches of its transformers arms); use --lanes {most} or fewer"
        )
