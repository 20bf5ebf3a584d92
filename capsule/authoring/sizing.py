"""What a plan costs to generate, and the contrast subsample that fits a budget.

Two readings. `plan_costs` (for `capsule plan new`, before a device is known): an upper bound, every
prompt at its arm's `max_new_tokens`, at one throughput for every arm. `estimate_plan` (for
`capsule plan cost`): per arm, tokens expected from the response-length model and at most from the
budget, each priced at the device's throughput for that arm's backend, dtype and batch
(`capsule.authoring.devices`), plus one backend start per run of arms that share an engine; then the
total run one arm after another, and with N lanes (engine runs packed, longest first, onto N lanes
that are assumed not to slow each other: arithmetic, not a measurement).
"""

from __future__ import annotations

from dataclasses import dataclass

from capsule.authoring.devices import Device, DeviceTable, arm_throughput
from capsule.authoring.response_lengths import NOT_MEASURED, LengthModel, length_model
from capsule.pins import IFEVAL_PROMPTS_N
from capsule.prereg.engine_sharing import engine_runs
from capsule.prereg.plan import Arm, Plan


@dataclass(frozen=True)
class ArmCost:
    """One arm's prompts, its most generated tokens, and the minutes those take at the given throughput."""

    arm: str
    prompts: int
    tokens: int
    minutes: float


def arm_prompts(plan: Plan, arm: Arm) -> int:
    """How many prompts the arm's subset holds (all: the pinned prompt count)."""
    subset = plan.prompts.subsets[arm.subset]
    return IFEVAL_PROMPTS_N if subset.rule == "all" else subset.n


def plan_costs(plan: Plan, tokens_per_s: float) -> list[ArmCost]:
    """Each arm's upper-bound cost at `tokens_per_s` generated tokens per second."""
    costs = []
    for arm in plan.arms:
        prompts = arm_prompts(plan, arm)
        tokens = prompts * arm.max_new_tokens
        costs.append(ArmCost(arm.name, prompts, tokens, tokens / tokens_per_s / 60.0))
    return costs


def fitting_subsample(plan: Plan, subset: str, tokens_per_s: float, budget_minutes: float, floor: int) -> int:
    """The size of `subset` (between `floor` and every prompt) that brings the plan's upper-bound cost
    within `budget_minutes`; `floor` when even that does not fit (the caller says so)."""
    per_prompt = sum(arm.max_new_tokens for arm in plan.arms if arm.subset == subset)
    fixed = sum(arm_prompts(plan, arm) * arm.max_new_tokens for arm in plan.arms if arm.subset != subset)
    spare = budget_minutes * 60.0 * tokens_per_s - fixed
    if per_prompt == 0:
        return IFEVAL_PROMPTS_N
    return max(floor, min(IFEVAL_PROMPTS_N, int(spare // per_prompt)))


@dataclass(frozen=True)
class ArmEstimate:
    """One arm on one device: tokens expected and at most, the throughput and why, minutes of each."""

    arm: str
    backend: str
    prompts: int
    budget: int
    tokens_expected: int
    tokens_most: int
    length_source: str
    tok_per_s: float
    throughput_source: str
    start_s: float  # the backend start this arm pays (0 when it shares the previous arm's)

    @property
    def minutes_expected(self) -> float:
        """Generation minutes at the expected token count (the start not included)."""
        return self.tokens_expected / self.tok_per_s / 60.0

    @property
    def minutes_most(self) -> float:
        """Generation minutes with every response at its budget."""
        return self.tokens_most / self.tok_per_s / 60.0


@dataclass(frozen=True)
class PlanEstimate:
    """A plan's arms on one device, grouped into engine runs (each a lane's unit of work)."""

    device: Device
    arms: tuple[ArmEstimate, ...]
    runs: tuple[tuple[str, ...], ...]  # arm names of each engine run, plan order

    def _run_minutes(self, most: bool) -> list[float]:
        by_name = {a.arm: a for a in self.arms}

        def minutes(arm: ArmEstimate) -> float:
            return arm.start_s / 60.0 + (arm.minutes_most if most else arm.minutes_expected)

        return [sum(minutes(by_name[name]) for name in run) for run in self.runs]

    def sequential(self, most: bool = False) -> float:
        """Minutes for every arm one after another, starts included."""
        return sum(self._run_minutes(most))

    def lane_runs(self, lanes: int, most: bool = False) -> list[list[int]]:
        """Which engine runs (indices into `runs`) each of `lanes` lanes gets: `place_longest_first`
        on each run's minutes. `capsule reproduce --lanes` runs its lanes by this placement."""
        return place_longest_first(self._run_minutes(most), lanes)

    def with_lanes(self, lanes: int, most: bool = False) -> float:
        """Minutes with `lanes` lanes: engine runs (never split) placed longest first on the least
        loaded lane; the longest lane's minutes. Assumes lanes do not slow each other."""
        minutes = self._run_minutes(most)
        return max(sum(minutes[i] for i in lane) for lane in place_longest_first(minutes, lanes))


def place_longest_first(weights: list[float], lanes: int) -> list[list[int]]:
    """Each item (by index) placed, longest first, on the least loaded of `lanes` lanes (ties: the
    lower lane, then the earlier item); each lane's items in index order. The one placement rule
    of `plan cost --lanes` and `reproduce --lanes`."""
    loads = [0.0] * max(1, lanes)
    placed: list[list[int]] = [[] for _ in loads]
    for index in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        lane = loads.index(min(loads))
        loads[lane] += weights[index]
        placed[lane].append(index)
    return [sorted(lane) for lane in placed]


def estimate_plan(
    plan: Plan, table: DeviceTable, device: Device, lengths: tuple[LengthModel, ...]
) -> PlanEstimate:
    """Every arm of `plan` priced on `device` (see the module docstring)."""
    estimates = []
    runs = engine_runs(plan.arms)
    for run in runs:
        for index, arm in enumerate(run):
            prompts = arm_prompts(plan, arm)
            model = length_model(lengths, plan, arm)
            per_prompt = model.expected(arm.max_new_tokens) if model else float(arm.max_new_tokens)
            rate = arm_throughput(table, device, arm)
            estimates.append(
                ArmEstimate(
                    arm.name, arm.backend, prompts, arm.max_new_tokens, round(prompts * per_prompt),
                    prompts * arm.max_new_tokens, model.source if model else NOT_MEASURED,
                    rate.tok_per_s, rate.source, device.start_s[arm.backend] if index == 0 else 0.0,
                )
            )
    order = {a.name: i for i, a in enumerate(plan.arms)}
    estimates.sort(key=lambda e: order[e.arm])
    return PlanEstimate(device, tuple(estimates), tuple(tuple(a.name for a in run) for run in runs))
