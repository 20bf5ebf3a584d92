"""Scores: per-prompt verdicts, the four IFEval metrics, per-instruction and per-category accuracy.

Metric names are upstream's. Values are fractions in [0, 1]; multiply by 100 for the usual points.
Prompt level: the share of prompts whose every instruction passed. Instruction level: the share of
all instructions (over all prompts) that passed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ifeval_scorer.evaluate import PromptVerdicts
from ifeval_scorer.registry import category

Mode = Literal["strict", "loose"]
MODES: tuple[Mode, ...] = ("strict", "loose")
METRICS: tuple[str, ...] = (
    "prompt_level_strict_acc",
    "inst_level_strict_acc",
    "prompt_level_loose_acc",
    "inst_level_loose_acc",
)


@dataclass(frozen=True)
class Tally:
    """Counts behind one accuracy: `passed` of `total`."""

    passed: int
    total: int

    @property
    def accuracy(self) -> float:
        """passed / total (0.0 when there is nothing to count)."""
        return self.passed / self.total if self.total else 0.0


def metric_tallies(verdicts: Iterable[PromptVerdicts]) -> dict[str, Tally]:
    """The counts behind the four metrics."""
    prompts = {mode: [0, 0] for mode in MODES}
    instructions = {mode: [0, 0] for mode in MODES}
    for item in verdicts:
        for mode in MODES:
            flags = getattr(item, mode)
            prompts[mode][0] += all(flags)
            prompts[mode][1] += 1
            instructions[mode][0] += sum(flags)
            instructions[mode][1] += len(flags)
    return {
        f"{level}_level_{mode}_acc": Tally(*counts[mode])
        for mode in MODES
        for level, counts in (("prompt", prompts), ("inst", instructions))
    }


def score_row(item: PromptVerdicts) -> dict[str, Any]:
    """The scores-file row: `key, instruction_id_list, strict: {prompt, instructions}, loose: {...}`."""
    row: dict[str, Any] = {"key": item.key, "instruction_id_list": list(item.instruction_id_list)}
    for mode in MODES:
        flags = list(getattr(item, mode))
        row[mode] = {"prompt": all(flags), "instructions": flags}
    return row


@dataclass(frozen=True)
class Scores:
    """The result of scoring one set of responses under one seed (None: upstream's unseeded draws)."""

    prompts: tuple[PromptVerdicts, ...]
    seed: int | None

    @property
    def tallies(self) -> dict[str, Tally]:
        """Counts behind each metric, keyed by metric name."""
        return metric_tallies(self.prompts)

    @property
    def metrics(self) -> dict[str, float]:
        """The four metrics as fractions, keyed by upstream's names, in `METRICS` order."""
        tallies = self.tallies
        return {name: tallies[name].accuracy for name in METRICS}

    def by_key(self) -> Mapping[int, PromptVerdicts]:
        """Verdicts keyed by prompt key."""
        return {item.key: item for item in self.prompts}

    @property
    def rows(self) -> list[dict[str, Any]]:
        """Scores-file rows in input order."""
        return [score_row(item) for item in self.prompts]

    def per_instruction(self, mode: Mode = "strict") -> dict[str, Tally]:
        """Accuracy of each instruction id, over the prompts that carry it."""
        return _group(self.prompts, mode, lambda instruction_id: instruction_id)

    def per_category(self, mode: Mode = "strict") -> dict[str, Tally]:
        """Accuracy of each instruction family (`keywords`, `length_constraints`, ...)."""
        return _group(self.prompts, mode, category)


def _group(verdicts: Iterable[PromptVerdicts], mode: Mode, name_of: Any) -> dict[str, Tally]:
    counts: dict[str, list[int]] = {}
    for item in verdicts:
        for instruction_id, passed in zip(item.instruction_id_list, getattr(item, mode), strict=True):
            slot = counts.setdefault(name_of(instruction_id), [0, 0])
            slot[0] += passed
            slot[1] += 1
    return {name: Tally(*counts[name]) for name in sorted(counts)}
