"""What a plan costs to generate, from one throughput figure, and the contrast subsample that fits a budget.

The cost is an upper bound: every prompt is counted at its arm's `max_new_tokens` (a response that
stops early costs less), at one generation throughput for every arm (model loading not included).
"""

from __future__ import annotations

from dataclasses import dataclass

from capsule.pins import IFEVAL_PROMPTS_N
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
