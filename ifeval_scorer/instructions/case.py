"""`change_case:*`: all capitals or all lowercase (and English), or a count of capitalised words."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ifeval_scorer.rule import Context, compare, present, relation
from ifeval_scorer.text import count_capital_words

_MAX_CAPITAL_WORDS = 20


@dataclass(frozen=True)
class CapitalWordFrequency:
    """NLTK word tokens in capitals are "less than" / "at least" `capital_frequency`."""

    instruction_id: ClassVar[str] = "change_case:capital_word_frequency"
    frequency: int
    relation: str

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> CapitalWordFrequency:
        """From `capital_frequency` and `capital_relation` (a negative frequency is kept, as upstream)."""
        kept = present(kwargs, ("capital_frequency", "capital_relation"), cls.instruction_id)
        frequency = kept.get("capital_frequency")
        if frequency is None:
            frequency = ctx.rng.randint(1, _MAX_CAPITAL_WORDS)
        return cls(int(frequency), relation(kept.get("capital_relation"), ctx, cls.instruction_id))

    def check(self, response: str) -> bool:
        """Count capitalised tokens and compare."""
        return compare(count_capital_words(response), self.relation, self.frequency)


def _is_english(detect: Callable[[str], str | None], response: str) -> bool:
    found = detect(response)
    return found is None or found == "en"  # undetectable text passes, as upstream


@dataclass(frozen=True)
class EnglishCapital:
    """`str.isupper()` holds, and langdetect says English (checked only when the case test passes)."""

    instruction_id: ClassVar[str] = "change_case:english_capital"
    detect: Callable[[str], str | None]

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> EnglishCapital:
        """No kwargs."""
        present(kwargs, (), cls.instruction_id)
        return cls(ctx.detect)

    def check(self, response: str) -> bool:
        """Case test, then language."""
        return response.isupper() and _is_english(self.detect, response)


@dataclass(frozen=True)
class EnglishLowercase:
    """`str.islower()` holds, and langdetect says English (checked only when the case test passes)."""

    instruction_id: ClassVar[str] = "change_case:english_lowercase"
    detect: Callable[[str], str | None]

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> EnglishLowercase:
        """No kwargs."""
        present(kwargs, (), cls.instruction_id)
        return cls(ctx.detect)

    def check(self, response: str) -> bool:
        """Case test, then language."""
        return response.islower() and _is_english(self.detect, response)
