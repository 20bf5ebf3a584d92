"""The ambiguity band: how far each metric can move with the letter upstream draws at random.

`keywords:letter_frequency` with a letter that is not a-z (prompts 1122 `#` and 1129 `!`) checks a
letter drawn from the 52 ASCII letters instead. For every prompt where that happens we evaluate all
52 letters and take, per prompt, the lowest and highest value each metric's numerator can reach;
summed over prompts (each prompt's letter is drawn independently) these give the band's ends. Every
other prompt contributes its seeded verdict. The band says which scores a faithful run of the
official scorer can report for these responses (langdetect held at `seed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ifeval_scorer.evaluate import PromptVerdicts, evaluate_prompt
from ifeval_scorer.inputs import Response, rows_in_memory, validate_rows
from ifeval_scorer.prompts import Prompt, PromptSource, prompt_table
from ifeval_scorer.rule import LETTERS
from ifeval_scorer.scores import METRICS, Scores, metric_tallies


@dataclass(frozen=True)
class Band:
    """Lowest and highest value of each metric over all letter draws, and where the draws happen."""

    low: dict[str, float]
    high: dict[str, float]
    ambiguous_keys: tuple[int, ...]
    scores: Scores  # the seeded scores the band is built around

    def contains(self, metric: str, value: float, tolerance: float = 5e-5) -> bool:
        """Whether `value` (a fraction) lies in the band of `metric`, allowing for rounding."""
        return self.low[metric] - tolerance <= value <= self.high[metric] + tolerance

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary: per metric low, seeded value and high; the ambiguous keys."""
        seeded = self.scores.metrics
        return {
            "seed": self.scores.seed,
            "ambiguous_keys": list(self.ambiguous_keys),
            "metrics": {m: {"low": self.low[m], "seeded": seeded[m], "high": self.high[m]} for m in METRICS},
        }


def _extremes(options: list[PromptVerdicts]) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    lows: dict[str, int] = {}
    highs: dict[str, int] = {}
    totals: dict[str, int] = {}
    per_option = [metric_tallies([option]) for option in options]
    for name in METRICS:
        values = [tallies[name].passed for tallies in per_option]
        lows[name], highs[name] = min(values), max(values)
        totals[name] = per_option[0][name].total
    return lows, highs, totals


def band_of(responses: Iterable[Response], prompts: Mapping[int, Prompt], *, seed: int = 0) -> Band:
    """The band for validated responses (see the module docstring)."""
    verdicts: list[PromptVerdicts] = []
    low = dict.fromkeys(METRICS, 0)
    high = dict.fromkeys(METRICS, 0)
    total = dict.fromkeys(METRICS, 0)
    ambiguous: list[int] = []
    for item in responses:
        prompt = prompts[item.key]
        seeded = evaluate_prompt(prompt, item.response, seed)
        verdicts.append(seeded)
        options = [seeded]
        if seeded.random_letter:
            ambiguous.append(item.key)
            options = [evaluate_prompt(prompt, item.response, seed, letter=letter) for letter in LETTERS]
        lows, highs, totals = _extremes(options)
        for name in METRICS:
            low[name] += lows[name]
            high[name] += highs[name]
            total[name] += totals[name]
    return Band(
        low={name: low[name] / total[name] if total[name] else 0.0 for name in METRICS},
        high={name: high[name] / total[name] if total[name] else 0.0 for name in METRICS},
        ambiguous_keys=tuple(ambiguous),
        scores=Scores(prompts=tuple(verdicts), seed=seed),
    )


def letter_band(rows: Iterable[Mapping[str, Any]], *, seed: int = 0, prompts: PromptSource) -> Band:
    """The ambiguity band for rows with `key` and `response`; `prompts`: a path or a loaded {key: Prompt}."""
    table = prompt_table(prompts)
    return band_of(validate_rows(rows_in_memory(rows), table), table, seed=seed)
