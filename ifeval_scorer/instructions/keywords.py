"""`keywords:*`: words that must appear, must not appear, or appear a number of times; letter counts.

Keywords are used as regular expressions, unescaped and case-insensitive, as upstream uses them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ifeval_scorer.rule import Context, InstructionError, compare, present, relation, threshold

_MAX_LETTER_FREQUENCY = 10
_MAX_KEYWORD_FREQUENCY = 3


def _required(kept: Mapping[str, Any], name: str, instruction_id: str) -> Any:
    if name not in kept:
        # Upstream would draw random words from its own word list here; the pinned prompts never need it.
        raise InstructionError(f"{instruction_id}: kwarg {name!r} is required")
    return kept[name]


@dataclass(frozen=True)
class Existence:
    """Every keyword occurs somewhere in the response (as a case-insensitive regex search)."""

    instruction_id: ClassVar[str] = "keywords:existence"
    keywords: tuple[re.Pattern[str], ...]

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> Existence:
        """Keywords from `keywords`, searched in sorted order."""
        kept = present(kwargs, ("keywords",), cls.instruction_id)
        words = sorted(_required(kept, "keywords", cls.instruction_id))
        return cls(tuple(re.compile(word, re.IGNORECASE) for word in words))

    def check(self, response: str) -> bool:
        """True when each keyword pattern is found."""
        return all(pattern.search(response) for pattern in self.keywords)


@dataclass(frozen=True)
class Frequency:
    """A keyword occurs "less than" / "at least" `frequency` times (non-overlapping regex matches)."""

    instruction_id: ClassVar[str] = "keywords:frequency"
    keyword: re.Pattern[str]
    frequency: int
    relation: str

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> Frequency:
        """From `keyword` (stripped), `frequency`, `relation`."""
        kept = present(kwargs, ("keyword", "frequency", "relation"), cls.instruction_id)
        keyword = str(_required(kept, "keyword", cls.instruction_id)).strip()
        frequency = threshold(kept.get("frequency"), ctx, 1, _MAX_KEYWORD_FREQUENCY)
        return cls(re.compile(keyword, re.IGNORECASE), frequency,
                   relation(kept.get("relation"), ctx, cls.instruction_id))

    def check(self, response: str) -> bool:
        """Count the matches and compare."""
        return compare(len(self.keyword.findall(response)), self.relation, self.frequency)


@dataclass(frozen=True)
class ForbiddenWords:
    """None of the words occurs as a whole word (`\\bword\\b`, case-insensitive regex)."""

    instruction_id: ClassVar[str] = "keywords:forbidden_words"
    words: tuple[re.Pattern[str], ...]

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> ForbiddenWords:
        """From `forbidden_words`, deduplicated and sorted."""
        kept = present(kwargs, ("forbidden_words",), cls.instruction_id)
        words = sorted(set(_required(kept, "forbidden_words", cls.instruction_id)))
        return cls(tuple(re.compile(r"\b" + word + r"\b", re.IGNORECASE) for word in words))

    def check(self, response: str) -> bool:
        """True when no forbidden word is found."""
        return not any(pattern.search(response) for pattern in self.words)


def letter_is_valid(letter: Any) -> bool:
    """Whether upstream keeps `letter` as given: one character whose lowercase is in a..z.

    Anything else (empty, longer, `#`, `!`, a non-ASCII letter) is replaced by a random letter.
    """
    return isinstance(letter, str) and len(letter) == 1 and "a" <= letter.lower() <= "z"


@dataclass(frozen=True)
class LetterFrequency:
    """A letter occurs "less than" / "at least" `frequency` times in the lowercased response."""

    instruction_id: ClassVar[str] = "keywords:letter_frequency"
    letter: str
    frequency: int
    relation: str

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> LetterFrequency:
        """From `letter`, `let_frequency`, `let_relation`; an invalid letter is drawn (see `Context`)."""
        kept = present(kwargs, ("letter", "let_frequency", "let_relation"), cls.instruction_id)
        given = kept.get("letter")
        letter = given.strip() if isinstance(given, str) and letter_is_valid(given) else ctx.draw_letter()
        frequency = threshold(kept.get("let_frequency"), ctx, 1, _MAX_LETTER_FREQUENCY)
        return cls(letter.lower(), frequency, relation(kept.get("let_relation"), ctx, cls.instruction_id))

    def check(self, response: str) -> bool:
        """Count the letter in `response.lower()` and compare."""
        return compare(response.lower().count(self.letter), self.relation, self.frequency)
