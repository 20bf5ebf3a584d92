"""What a plan costs to generate, and the contrast subsample that fits a budget.

Two readings. `plan_costs` (for `capsule plan new`, before a device is known): an upper bound, every
prompt at its arm's `max_new_tokens`, at one throughput for every arm. `estimate_plan` (for
`capsule plan cost`): per arm, tokens expected from the response-length model and at most from the
budget, each priced at the device's throughput for that arm's backend, dtype and batch
(`capsule.costing.devices`; a static transformers batch by its longest member's steps where the
length model states them), nothing expected for an arm the backend is expected to refuse, plus one
backend start per run of arms that share an engine; then the total run one arm after another, and
with N lanes (engine runs packed, longest first, onto N lanes that are assumed not to slow each
other: arithmetic, not a measurement; `capsule.costing.lane_plan` arranges them lane by lane).
"""

from __future__ import annotations

from dataclasses import dataclass

from capsule.costing.devices import Device, DeviceTable, arm_throughput
from capsule.costing.response_lengths import NOT_MEASURED, LengthModel, length_model
from capsule.errors import BadInputError
from capsule.pins import IFEVAL_PROMPTS_N
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.backend_types import cuda_index
from capsule.prereg.engine_sharing import batch_count, engine_runs, lane_units, splittable
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
    """One arm on one device: tokens expected and at most, the throughput and why, seconds of each,
    the arithmetic in words, and why it generates nothing where the backend is expected to refuse it."""

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
    seconds_expected: float  # generation only, the start not included
    seconds_most: float
    arithmetic: str
    refused: str = ""  # why it is expected to generate nothing (refused at start or load); "" if it runs
    hardware: str = ""  # the hardware kind it asks a cluster node for ("" any)

    @property
    def minutes_expected(self) -> float:
        """Generation minutes expected (the start not included)."""
        return self.seconds_expected / 60.0

    @property
    def minutes_most(self) -> float:
        """Generation minutes with every response at its budget."""
        return self.seconds_most / 60.0


@dataclass(frozen=True)
class PlanEstimate:
    """A plan's arms on one device, grouped into engine runs (each a lane's unit of work)."""

    device: Device
    arms: tuple[ArmEstimate, ...]
    runs: tuple[tuple[str, ...], ...]  # arm names of each engine run, plan order
    units: tuple[tuple[str, ...], ...]  # arm names of each lane unit (`lane_units`), plan order
    gpu_count: int = 1
    shareable: tuple[tuple[str, int], ...] = ()  # each arm lanes may cut into batch shares, its batches

    def arm(self, name: str) -> ArmEstimate:
        """The estimate of the arm called `name`."""
        return next(a for a in self.arms if a.arm == name)

    def run_minutes(self, run: tuple[str, ...], most: bool = False) -> float:
        """Minutes of one engine run or lane unit: one start of its backend plus each arm's
        generation (a transformers arm split into its own unit pays a load of its own)."""
        start_s = self.device.start_s[self.arm(run[0]).backend]
        return start_s / 60.0 + sum(
            self.arm(name).minutes_most if most else self.arm(name).minutes_expected for name in run
        )

    def _run_minutes(self, most: bool) -> list[float]:
        return [self.run_minutes(run, most) for run in self.runs]

    def sequential(self, most: bool = False) -> float:
        """Minutes for every arm one after another, starts included."""
        return sum(self._run_minutes(most))


def check_kinds(kinds: list[str], lanes: int) -> list[str]:
    """The hardware kinds asked for (sorted); BadInputError when they are more than the lanes, as
    a lane runs on one kind of node."""
    needed = sorted({kind for kind in kinds if kind})
    if len(needed) > lanes:
        raise BadInputError(
            f"--lanes {lanes}: the plan's arms ask for {len(needed)} hardware kinds ({', '.join(needed)}), "
            "and a lane runs on one: give at least that many lanes"
        )
    return needed


def place_longest_first(
    weights: list[float], lanes: int, kinds: list[str] | None = None
) -> list[list[int]]:
    """Each item (by index) placed, longest first, on the least loaded of `lanes` lanes (ties: the
    lower lane, then the earlier item); each lane's items in index order. The one placement rule
    of `plan cost --lanes` and `reproduce --lanes`. `kinds`: each item's hardware kind ("" any):
    a lane holds items of one kind (and any "" items), and a kind takes a new lane only while one is
    left for every kind not yet placed; BadInputError when the lanes are fewer than the kinds."""
    count = max(1, lanes)
    asked = kinds if kinds is not None else [""] * len(weights)
    needed = check_kinds(asked, count)
    loads = [0.0] * count
    placed: list[list[int]] = [[] for _ in loads]
    lane_kind: list[str] = [""] * count
    for index in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        kind = asked[index]
        free = [lane for lane in range(count) if not lane_kind[lane]]
        unplaced = [k for k in needed if k != kind and k not in lane_kind]
        if kind and kind in lane_kind and len(free) <= len(unplaced):
            free = []  # the free lanes are kept for the kinds still to come
        choices = list(range(count))
        if kind:
            choices = [lane for lane in choices if lane_kind[lane] == kind] + free
        lane = min(choices, key=lambda c: (loads[c], c))
        if kind:
            lane_kind[lane] = kind
        loads[lane] += weights[index]
        placed[lane].append(index)
    return [sorted(lane) for lane in placed]


def _device_absent(arm: Arm, device: Device, gpu_count: int) -> str:
    """Why an arm pinned to `cuda:K` cannot load on a host with `gpu_count` GPUs; "" when it can."""
    pinned = arm.backend_options.get("device")
    index = cuda_index(pinned)
    if device.kind != "gpu" or index is None or index < gpu_count:
        return ""
    return (
        f"refused at load: {pinned} is absent on a host with {gpu_count} GPU(s) "
        "(the arm's control reads not run)"
    )


def _generation_seconds(
    arm: Arm, prompts: int, model: LengthModel | None, per_prompt: float, tok_per_s: float
) -> tuple[float, float, str]:
    """Seconds expected and at most, and the arithmetic: a static transformers batch whose expected
    steps the length model states costs batches x steps x step time; anything else, tokens / rate."""
    static = model is not None and SPECS[arm.backend].static_batches
    steps = model.batch_steps(arm.max_new_tokens, arm.batch_size) if model and static else None
    if steps is not None:
        batches = -(-prompts // arm.batch_size)
        step_s = arm.batch_size / tok_per_s
        return (
            batches * steps * step_s,
            batches * arm.max_new_tokens * step_s,
            f"{batches} batches x {steps:g} steps (at most {arm.max_new_tokens}) x {step_s * 1000:.1f} ms",
        )
    expected, most = prompts * per_prompt, prompts * arm.max_new_tokens
    return (
        expected / tok_per_s,
        most / tok_per_s,
        f"{prompts} x {per_prompt:.0f} tokens (at most {arm.max_new_tokens}) / {tok_per_s:.0f} tok/s",
    )


def estimate_plan(
    plan: Plan, table: DeviceTable, device: Device, lengths: tuple[LengthModel, ...], gpu_count: int = 1
) -> PlanEstimate:
    """Every arm of `plan` priced on `device` with `gpu_count` GPUs (see the module docstring). An arm
    the table expects its backend to refuse at start, or pinned to an absent GPU, generates nothing
    expected (its start is still paid); at most, a refused-at-start arm is priced as if it ran."""
    estimates = []
    runs = engine_runs(plan.arms)
    for run in runs:
        for index, arm in enumerate(run):
            prompts = arm_prompts(plan, arm)
            model = length_model(lengths, plan, arm)
            per_prompt = model.expected(arm.max_new_tokens) if model else float(arm.max_new_tokens)
            rate = arm_throughput(table, device, arm)
            expected_s, most_s, arithmetic = _generation_seconds(
                arm, prompts, model, per_prompt, rate.tok_per_s
            )
            absent = _device_absent(arm, device, gpu_count)
            refusal = table.refusal(plan.model.name, device, arm)
            refused = absent or (f"refused at start: {refusal.source}" if refusal else "")
            if refused:
                expected_s, per_prompt = 0.0, 0.0
                most_s = 0.0 if absent else most_s
            estimates.append(
                ArmEstimate(
                    arm.name, arm.backend, prompts, arm.max_new_tokens, round(prompts * per_prompt),
                    0 if absent else prompts * arm.max_new_tokens, model.source if model else NOT_MEASURED,
                    rate.tok_per_s, rate.source, device.start_s[arm.backend] if index == 0 else 0.0,
                    expected_s, most_s, refused or arithmetic, refused, arm.hardware,
                )
            )
    order = {a.name: i for i, a in enumerate(plan.arms)}
    estimates.sort(key=lambda e: order[e.arm])
    runs_named = tuple(tuple(a.name for a in run) for run in runs)
    units_named = tuple(tuple(a.name for a in unit) for unit in lane_units(plan.arms))
    shareable = tuple(
        (arm.name, batch_count(plan, arm)) for arm in plan.arms if splittable(arm)
    )
    return PlanEstimate(device, tuple(estimates), runs_named, units_named, gpu_count, shareable)
