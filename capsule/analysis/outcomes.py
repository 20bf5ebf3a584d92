"""Per-prompt outcomes of one arm, read from its score rows: what every metric and interval is built on.

A metric is a list of *parts*, each a pair of per-prompt arrays (numerator, denominator), and its
value is the plain mean over parts of sum(numerator) / sum(denominator). A prompt-level metric has
one part (prompt passed 0/1 over 1); an instruction-level metric has one part (instructions passed
over instructions carried, so pooling over prompts is exact); a composite such as the SmolLM2 card's
"average of prompt and instruction level" is the parts of its members. Keeping per-prompt arrays
(rather than totals) is what lets the bootstrap resample prompts as clusters and lets the flips
search change one prompt at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from capsule.errors import BadInputError
from capsule.prereg.metrics import ALL_METRICS, COMPOSITES

Part = tuple[np.ndarray, np.ndarray]  # (numerator per prompt, denominator per prompt), float64
READINGS: tuple[str, ...] = ("strict", "loose")


@dataclass(frozen=True)
class Outcomes:
    """One arm's verdicts per prompt, in ascending key order (arrays aligned with `keys`)."""

    keys: tuple[int, ...]
    prompt_pass: Mapping[str, np.ndarray]  # reading -> 0/1 per prompt
    inst_pass: Mapping[str, np.ndarray]  # reading -> instructions passed per prompt
    n_inst: np.ndarray  # instructions carried per prompt
    instruction_ids: tuple[tuple[str, ...], ...]

    @property
    def n(self) -> int:
        """Number of prompts."""
        return len(self.keys)

    def subset(self, keys: Iterable[int]) -> Outcomes:
        """The outcomes of `keys` only (each must be present), in ascending key order."""
        where = {key: index for index, key in enumerate(self.keys)}
        chosen = sorted(set(keys))
        index = np.array([where[key] for key in chosen], dtype=np.int64)
        return Outcomes(
            keys=tuple(chosen),
            prompt_pass={r: a[index] for r, a in self.prompt_pass.items()},
            inst_pass={r: a[index] for r, a in self.inst_pass.items()},
            n_inst=self.n_inst[index],
            instruction_ids=tuple(self.instruction_ids[i] for i in index),
        )


def outcomes_from_scores(rows: Sequence[Mapping[str, Any]], where: str = "scores") -> Outcomes:
    """Build `Outcomes` from score rows (`key`, `instruction_id_list`, `strict`/`loose` verdicts).

    Rows are validated (unique integer keys, instruction lists the same length as the verdicts)
    so a malformed scores file fails here with its key rather than as a wrong number later.
    """
    by_key: dict[int, Mapping[str, Any]] = {}
    for number, row in enumerate(rows, start=1):
        try:
            key = int(row["key"])
            ids = tuple(row["instruction_id_list"])
            for reading in READINGS:
                flags = row[reading]["instructions"]
                if len(flags) != len(ids) or bool(row[reading]["prompt"]) != all(flags):
                    raise ValueError(f"{reading} verdicts do not match {len(ids)} instructions")
        except (KeyError, TypeError, ValueError) as error:
            raise BadInputError(
                f"{where} row {number}: not a score row ({error}); rescore the arm"
            ) from error
        if key in by_key:
            raise BadInputError(f"{where} row {number}: duplicate key {key}; rescore the arm")
        by_key[key] = row
    keys = tuple(sorted(by_key))
    ordered = [by_key[key] for key in keys]
    return Outcomes(
        keys=keys,
        prompt_pass={r: np.array([float(row[r]["prompt"]) for row in ordered]) for r in READINGS},
        inst_pass={
            r: np.array([float(sum(map(bool, row[r]["instructions"]))) for row in ordered]) for r in READINGS
        },
        n_inst=np.array([float(len(row["instruction_id_list"])) for row in ordered]),
        instruction_ids=tuple(tuple(row["instruction_id_list"]) for row in ordered),
    )


def check_metric(metric: str) -> None:
    """Raise `BadInputError` unless `metric` is one of `capsule.prereg.metrics.ALL_METRICS`."""
    if metric not in ALL_METRICS:
        raise BadInputError(f"unknown metric {metric!r}; use one of {', '.join(ALL_METRICS)}")


def members(metric: str) -> tuple[str, ...]:
    """The base metrics a metric averages (itself for a base metric)."""
    check_metric(metric)
    return COMPOSITES.get(metric, (metric,))


def reading_of(metric: str) -> str:
    """ "strict" or "loose": the response reading a metric (or every member of a composite) uses.

    Paired tests count discordant prompts on the prompt-level pass of this reading.
    """
    found = {"strict" if "_strict_" in m else "loose" for m in members(metric)}
    if len(found) != 1:
        raise BadInputError(f"metric {metric!r} mixes strict and loose readings; pick one reading")
    return found.pop()


def parts(outcomes: Outcomes, metric: str) -> list[Part]:
    """The (numerator, denominator) arrays of `metric` over `outcomes` (see the module docstring)."""
    result: list[Part] = []
    for name in members(metric):
        reading = "strict" if "_strict_" in name else "loose"
        if name.startswith("prompt_level_"):
            result.append((outcomes.prompt_pass[reading], np.ones(outcomes.n)))
        else:
            result.append((outcomes.inst_pass[reading], outcomes.n_inst))
    return result


def value(metric_parts: Sequence[Part]) -> float:
    """The metric's value as a fraction: mean over parts of sum(num) / sum(den) (0.0 when empty)."""
    ratios = [float(num.sum() / den.sum()) if den.sum() else 0.0 for num, den in metric_parts]
    return float(np.mean(ratios)) if ratios else 0.0


def counts(outcomes: Outcomes, metric: str) -> dict[str, dict[str, int]]:
    """Passed / total behind each member of `metric`, keyed by member name (for the report's counts)."""
    return {
        name: {"passed": int(round(num.sum())), "total": int(round(den.sum()))}
        for name, (num, den) in zip(members(metric), parts(outcomes, metric), strict=True)
    }
