"""What each lane unit of `reproduce --lanes` weighs, and where it is placed: units priced in
minutes on this host's device by the cost model (`capsule plan cost --lanes` prices split loads the
same way), by token budget where the device table has no entry, or, for a rehearsal, by its engine
starts; then cut into batch shares and placed longest first (`placed_units`). The lanes themselves
are `capsule.pipeline.lanes`.
"""

from __future__ import annotations

from collections.abc import Callable

from capsule.costing.devices import device_table
from capsule.costing.pricing import match_host
from capsule.costing.response_lengths import length_models
from capsule.costing.sizing import arm_prompts, estimate_plan, place_longest_first
from capsule.errors import CapsuleError
from capsule.prereg.engine_sharing import LaneUnit, batch_count, lane_units, split_units
from capsule.prereg.plan import Arm, Plan


def _priced(plan: Plan, runs: list[list[Arm]], gpu_names: list[str]) -> tuple[list[float], list[float]]:
    """Each lane unit's estimated minutes on this host's device, its own start included (as `capsule
    plan cost --lanes` prices split loads), and the start's part; the token budget (prompts x
    max_new_tokens, no start) where the device table has no entry for it."""
    table = device_table()
    device = match_host(table, gpu_names)
    if device is not None:
        try:
            estimate = estimate_plan(plan, table, device, length_models(), max(1, len(gpu_names)))
            return (
                [estimate.run_minutes(tuple(arm.name for arm in run)) for run in runs],
                [device.start_s[run[0].backend] / 60.0 for run in runs],
            )
        except CapsuleError:  # an arm the table has no figure for on this device: budgets decide
            pass
    budgets = [float(sum(arm_prompts(plan, arm) * arm.max_new_tokens for arm in run)) for run in runs]
    return budgets, [0.0] * len(runs)


def start_weights(plan: Plan, runs: list[list[Arm]], gpu_names: list[str]) -> list[float]:
    """Each engine run priced as the one backend start it makes, in seconds on this host's device
    (the table's `start_s` for its backend; 1 where the host or backend has no entry): what a
    rehearsal's runs cost, whose arms are a few prompts and tokens each, so that their engine
    starts, not their arithmetic, are their time (pricing them as the plan's arms would put the
    cheap transformers arms on one lane and every vLLM engine on the other)."""
    device = match_host(device_table(), gpu_names)
    starts = device.start_s if device is not None else {}
    return [float(starts.get(run[0].backend, 1.0)) for run in runs]


Weights = Callable[[Plan, list[list[Arm]], list[str]], list[float]]  # prices a plan's engine runs


def placed_units(
    plan: Plan, lanes: int, weights: Weights | None, gpu_names: list[str], split: bool
) -> tuple[list[LaneUnit], list[list[int]]]:
    """The lane units (with `split`, long transformers arms cut into batch shares by `split_units`,
    on the default pricing's starts) and which of them each of `lanes` lanes gets
    (`place_longest_first`): the one arrangement `reproduce --lanes` runs."""
    runs = lane_units(plan.arms)
    if weights is None:
        priced, starts = _priced(plan, runs, gpu_names)
    else:
        priced = weights(plan, runs, gpu_names)
        starts = list(priced)  # a given pricing states no generation apart from its start
    units = [LaneUnit(tuple(run)) for run in runs]
    if split:
        counts = [batch_count(plan, run[0]) for run in runs]
        units, priced = split_units(units, priced, starts, counts, lanes)
    return units, place_longest_first(priced, lanes, [unit.arms[0].hardware for unit in units])
