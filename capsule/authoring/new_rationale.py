"""The rationale.md skeleton `capsule plan new` writes beside a new plan: what was fixed and why, and
what the user must still decide before sealing (each such point marked "Decide before sealing")."""

from __future__ import annotations

from capsule.costing.sizing import ArmCost
from capsule.prereg.plan import Plan

DECIDE = "**Decide before sealing:**"


def _cost_table(costs: list[ArmCost]) -> list[str]:
    lines = ["| arm | prompts | tokens (at most) | minutes (at most) |", "|---|---|---|---|"]
    lines += [f"| `{c.arm}` | {c.prompts} | {c.tokens:,} | {c.minutes:.1f} |" for c in costs]
    total = sum(c.minutes for c in costs)
    lines.append(f"| total | | {sum(c.tokens for c in costs):,} | {total:.1f} |")
    return lines


def rationale_skeleton(plan: Plan, costs: list[ArmCost], throughput: str, budget_minutes: float) -> str:
    """The Markdown text: the model and claim, each arm and control, the sizing arithmetic."""
    model, claim = plan.model, plan.claim
    pinned = (
        f"revision `{model.revision}` of `{model.repo}`"
        if model.source == "hub"
        else (f"the local directory (source `{model.source}`)")
    )
    contrast = plan.prompts.subsets["contrast"]
    lines = [
        f"# {plan.name}: rationale",
        "",
        "Written by `capsule plan new`; edit it, and the plan, then seal both with",
        f'`capsule prereg seal prereg/{plan.name} --note "..."` before any score exists.',
        "",
        "## The model and the claim",
        "",
        f"`{model.name}`, {pinned}: {len(model.files)} files pinned by sha256 in `[model.files]`",
        f"(loader `{model.loader}`).",
        "",
        f"The claim: {claim.text} ({claim.source}). The plan reads it as `{claim.metric}` and always",
        "reports the other readings beside it.",
        "",
        f"{DECIDE} is `{claim.metric}` the reading the card means (strict or loose, prompt or",
        "instruction level, or their average)? Say here why.",
        "",
        "## Arms and controls",
        "",
        f"- `claim`: the verdict arm, vLLM, greedy, thinking off, all 541 prompts, "
        f"{plan.arm('claim').max_new_tokens} new tokens.",
        f"- The contrasts run on the seeded subsample `contrast` ({contrast.n} prompts, seed "
        f"{contrast.seed}): rerun identity, batch size in the model's dtype and in fp32, transformers vs",
        "  vLLM, and seed vs batch under the sampling of the model's generation_config.json.",
        "- The scorer controls: stability (the claim arm scored 10 more times unseeded) and sanity",
        "  (hand-written compliant answers in `controls/compliant.jsonl` must score 100%).",
        "",
        f"{DECIDE} the card's own generation settings (sampling, thinking, token budget, batch size)",
        "if it states them: add an arm with them, or change the claim arm and say why here.",
        "",
        "## Cost",
        "",
        f"Sized at {throughput}, for a budget of {budget_minutes:g} minutes. Each figure is an upper",
        "bound (every response counted at its token budget), at one throughput for every arm:",
        "",
        *_cost_table(costs),
        "",
        f"{DECIDE} whether this fits the host the plan will run on; resize the `contrast` subsample",
        "or the token budget otherwise.",
        "",
    ]
    return "\n".join(lines)
