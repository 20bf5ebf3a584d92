"""ifeval_scorer: our own deterministic IFEval scorer, with verdicts equal to Google's reference.

    from ifeval_scorer import load_prompts, score, letter_band, METRICS
    prompts = load_prompts("input_data.jsonl")     # or pass the path itself as `prompts=`
    scores = score(rows, prompts=prompts)          # seed 0: a pure function of rows and prompts
    scores.metrics                                 # {"prompt_level_strict_acc": 0.7708, ...}
    score(rows, prompts=prompts, seed=None)        # upstream's unseeded behaviour (for its spread)
    letter_band(rows, prompts=prompts).low / .high # how far the random letter can move each metric

Rows need `key` and `response`; prompts and instruction lists come from the prompt file the caller
gives. The package stands alone: it imports nothing from the capsule that uses it.
"""

from __future__ import annotations

__version__ = "1.0.0"  # bump when any verdict can change; the manifest records it

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ifeval_scorer.band import Band, letter_band
    from ifeval_scorer.errors import (
        ScorerDataUnavailableError,
        ScorerError,
        ScorerInputError,
        ScorerVerificationError,
    )
    from ifeval_scorer.evaluate import PromptVerdicts, clear_caches, evaluate_prompt, loose_variants
    from ifeval_scorer.prompts import Prompt, PromptSource, load_prompts
    from ifeval_scorer.registry import INSTRUCTION_IDS, category
    from ifeval_scorer.scores import METRICS, Scores, Tally
    from ifeval_scorer.scoring import score

# public name -> the module that defines it. Loaded on first use (PEP 562), so that a light module of
# the package (`ifeval_scorer.jsonl`, the one JSON reader the capsule's every command uses) can be
# imported without NLTK, numpy and the 25 instruction rules.
_HOMES: dict[str, str] = {
    "Band": "band",
    "letter_band": "band",
    "ScorerDataUnavailableError": "errors",
    "ScorerError": "errors",
    "ScorerInputError": "errors",
    "ScorerVerificationError": "errors",
    "PromptVerdicts": "evaluate",
    "clear_caches": "evaluate",
    "evaluate_prompt": "evaluate",
    "loose_variants": "evaluate",
    "Prompt": "prompts",
    "PromptSource": "prompts",
    "load_prompts": "prompts",
    "INSTRUCTION_IDS": "registry",
    "category": "registry",
    "METRICS": "scores",
    "Scores": "scores",
    "Tally": "scores",
    "score": "scoring",
}


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (`from ifeval_scorer import score` works as before)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ifeval_scorer' has no attribute {name!r}")
    value = getattr(import_module(f"ifeval_scorer.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, loaded or not."""
    return sorted(set(globals()) | set(_HOMES))


__all__ = [
    "Band",
    "INSTRUCTION_IDS",
    "METRICS",
    "Prompt",
    "PromptSource",
    "PromptVerdicts",
    "ScorerDataUnavailableError",
    "ScorerError",
    "ScorerInputError",
    "ScorerVerificationError",
    "Scores",
    "Tally",
    "category",
    "clear_caches",
    "evaluate_prompt",
    "letter_band",
    "load_prompts",
    "loose_variants",
    "score",
]
