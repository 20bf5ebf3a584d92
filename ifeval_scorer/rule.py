"""The one interface every IFEval instruction implements: build from kwargs, then check a response.

A rule is built once per prompt from the prompt file's kwargs (with upstream's quirk that falsy
values count as absent) and a `Context`, then `check(response)` says whether a response follows it.
The context carries everything random: the generator upstream draws defaults from, the letter
override the ambiguity band uses, and the langdetect seed.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from ifeval_scorer.detect import detect_language

LESS_THAN = "less than"
AT_LEAST = "at least"
RELATIONS = (LESS_THAN, AT_LEAST)
LETTERS = tuple(string.ascii_letters)  # the 52 choices upstream draws a replacement letter from


class InstructionError(ValueError):
    """An instruction's kwargs cannot be built into a rule (unknown key, bad relation, ...)."""


@dataclass
class Context:
    """What a rule may need beyond its kwargs: randomness, the prompt text, the langdetect seed.

    `rng` replaces upstream's global `random` module: a rule draws from it exactly where upstream
    draws from `random` (and in the same order), so `random.Random(seed)` here gives the verdicts
    upstream gives after `random.seed(seed)`. `letter` forces the letter that
    `keywords:letter_frequency` would otherwise draw (used by the ambiguity band); `drew_letter`
    records that a draw happened.
    """

    rng: random.Random
    lang_seed: int | None
    prompt: str = ""
    letter: str | None = None
    drew_letter: bool = field(default=False)

    def draw_letter(self) -> str:
        """The replacement letter: the forced one if set, else `rng.choice` over the 52 ASCII letters."""
        self.drew_letter = True
        if self.letter is not None:
            return self.letter
        return self.rng.choice(LETTERS)

    def detect(self, text: str) -> str | None:
        """langdetect's language code for `text` under this context's seed (None: undetectable)."""
        return detect_language(text, self.lang_seed)


class Rule(Protocol):
    """A built instruction: `check(response)` is True when the response follows it."""

    instruction_id: ClassVar[str]

    def check(self, response: str) -> bool:
        """Whether `response` follows this instruction (the response is non-blank)."""
        ...


def present(kwargs: Mapping[str, Any], allowed: tuple[str, ...], instruction_id: str) -> dict[str, Any]:
    """The kwargs upstream passes on: falsy values dropped; a key outside `allowed` is an error."""
    kept = {name: value for name, value in kwargs.items() if value}
    unknown = sorted(set(kept) - set(allowed))
    if unknown:
        raise InstructionError(f"{instruction_id}: unexpected kwargs {unknown}; allowed {list(allowed)}")
    return kept


def relation(value: str | None, ctx: Context, instruction_id: str) -> str:
    """A comparison relation: validated, or drawn from RELATIONS when absent (as upstream draws it)."""
    if value is None:
        return ctx.rng.choice(RELATIONS)
    if value not in RELATIONS:
        raise InstructionError(f"{instruction_id}: relation must be one of {RELATIONS}, got {value!r}")
    return value


def threshold(value: int | None, ctx: Context, low: int, high: int) -> int:
    """A count threshold; absent or negative draws `randint(low, high)`, as upstream does."""
    if value is None or value < 0:
        return ctx.rng.randint(low, high)
    return int(value)


def compare(count: int, relation_: str, limit: int) -> bool:
    """`count < limit` for "less than", `count >= limit` for "at least"."""
    return count < limit if relation_ == LESS_THAN else count >= limit
