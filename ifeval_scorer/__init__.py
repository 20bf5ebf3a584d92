"""ifeval_scorer: our own deterministic IFEval scorer, with verdicts equal to Google's reference.

    from ifeval_scorer import score, letter_band, METRICS
    scores = score(rows)              # seed 0: a pure function of the rows
    scores.metrics                    # {"prompt_level_strict_acc": 0.7708, ...}
    score(rows, seed=None)            # upstream's unseeded behaviour (for measuring its spread)
    letter_band(rows).low / .high     # how far the random letter can move each metric

Rows need `key` and `response`; prompts and instruction lists come from the pinned prompt file.
"""

from __future__ import annotations

__version__ = "1.0.0"  # bump when any verdict can change; the manifest records it

from ifeval_scorer.band import Band, letter_band
from ifeval_scorer.evaluate import PromptVerdicts, clear_caches, evaluate_prompt, loose_variants
from ifeval_scorer.registry import INSTRUCTION_IDS, category
from ifeval_scorer.scores import METRICS, Scores, Tally
from ifeval_scorer.scoring import pinned_prompts, score

__all__ = [
    "Band",
    "INSTRUCTION_IDS",
    "METRICS",
    "PromptVerdicts",
    "Scores",
    "Tally",
    "category",
    "clear_caches",
    "evaluate_prompt",
    "letter_band",
    "loose_variants",
    "pinned_prompts",
    "score",
]
