"""The metric names a plan may use, and how composites are built from them.

`METRICS` are the four metrics the IFEval scorer reports (fractions, shown in percent). A composite
is the plain average of its member metrics, as model cards that quote one "IFEval" number use (the
SmolLM2 card: "average of prompt and instruction level").
"""

from __future__ import annotations

#: The scorer's four metrics: prompt level = all instructions of a prompt followed; instruction level
#: = fraction of all instructions (pooled over prompts) followed; strict or loose response reading.
METRICS: tuple[str, ...] = (
    "prompt_level_strict_acc",
    "inst_level_strict_acc",
    "prompt_level_loose_acc",
    "inst_level_loose_acc",
)

#: Composite metric -> the metrics it averages with equal weight.
COMPOSITES: dict[str, tuple[str, ...]] = {
    "card_avg_strict": ("prompt_level_strict_acc", "inst_level_strict_acc"),
    "card_avg_loose": ("prompt_level_loose_acc", "inst_level_loose_acc"),
}

#: Every name a plan may put in `metric`.
ALL_METRICS: tuple[str, ...] = METRICS + tuple(COMPOSITES)


def is_prompt_level(metric: str) -> bool:
    """Whether `metric` is a single binomial proportion over prompts (Wilson / Clopper-Pearson apply)."""
    return metric in METRICS and metric.startswith("prompt_level_")


def interval_kind(metric: str, requested: str) -> str:
    """The interval a reading of `metric` uses: the plan's `requested` kind for a prompt-level
    proportion, else the bootstrap (Wilson and Clopper-Pearson assume independent binary trials,
    which pooled instructions and composites are not). The analysis and the report both ask here."""
    return requested if is_prompt_level(metric) else "bootstrap"
