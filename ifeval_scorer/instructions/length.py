"""`length_constraints:*`: counts of sentences, words and paragraphs; the first word of a paragraph.

Two notions of paragraph, as upstream: `number_paragraphs` splits on the markdown divider `***`;
`nth_paragraph_first_word` splits on a blank line (`\\n\\n`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ifeval_scorer.rule import Context, InstructionError, compare, present, relation, threshold
from ifeval_scorer.text import count_sentences, count_words

_MAX_SENTENCES = 20
_MAX_PARAGRAPHS = 5
_WORDS_RANGE = (100, 500)
_DIVIDER = re.compile(r"\s?\*\*\*\s?")
_FIRST_WORD_STOP = frozenset(".,?!'\"")


@dataclass(frozen=True)
class NumberSentences:
    """Punkt sentence count is "less than" / "at least" `num_sentences`."""

    instruction_id: ClassVar[str] = "length_constraints:number_sentences"
    num_sentences: int
    relation: str

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> NumberSentences:
        """From `num_sentences` and `relation`."""
        kept = present(kwargs, ("num_sentences", "relation"), cls.instruction_id)
        limit = threshold(kept.get("num_sentences"), ctx, 1, _MAX_SENTENCES)
        return cls(limit, relation(kept.get("relation"), ctx, cls.instruction_id))

    def check(self, response: str) -> bool:
        """Count sentences and compare."""
        return compare(count_sentences(response), self.relation, self.num_sentences)


@dataclass(frozen=True)
class NumberWords:
    """`\\w+` count is "less than" / "at least" `num_words`."""

    instruction_id: ClassVar[str] = "length_constraints:number_words"
    num_words: int
    relation: str

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> NumberWords:
        """From `num_words` and `relation`."""
        kept = present(kwargs, ("num_words", "relation"), cls.instruction_id)
        limit = threshold(kept.get("num_words"), ctx, *_WORDS_RANGE)
        return cls(limit, relation(kept.get("relation"), ctx, cls.instruction_id))

    def check(self, response: str) -> bool:
        """Count words and compare."""
        return compare(count_words(response), self.relation, self.num_words)


def divider_paragraphs(response: str) -> int | None:
    """Paragraphs between `***` dividers; None when an inner one is blank (which fails the rule).

    A blank piece at either end (a leading or trailing divider) is not counted.
    """
    pieces = _DIVIDER.split(response)
    count = len(pieces)
    last = len(pieces) - 1
    for index, piece in enumerate(pieces):
        if not piece.strip():
            if index in (0, last):
                count -= 1
            else:
                return None
    return count


@dataclass(frozen=True)
class NumberParagraphs:
    """Exactly `num_paragraphs` paragraphs separated by `***`, none of them blank."""

    instruction_id: ClassVar[str] = "length_constraints:number_paragraphs"
    num_paragraphs: int

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> NumberParagraphs:
        """From `num_paragraphs`."""
        kept = present(kwargs, ("num_paragraphs",), cls.instruction_id)
        return cls(threshold(kept.get("num_paragraphs"), ctx, 1, _MAX_PARAGRAPHS))

    def check(self, response: str) -> bool:
        """Count and compare for equality."""
        return divider_paragraphs(response) == self.num_paragraphs


def first_word(paragraph: str) -> str:
    """Upstream's first word: leading quotes dropped, cut at the first of `. , ? ! ' "`, lowercased."""
    word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
    letters: list[str] = []
    for char in word:
        if char in _FIRST_WORD_STOP:
            break
        letters.append(char.lower())
    return "".join(letters)


@dataclass(frozen=True)
class NthParagraphFirstWord:
    """`num_paragraphs` non-blank blocks split on `\\n\\n`; block `nth_paragraph` starts with `first_word`.

    Upstream counts only non-blank blocks but indexes the raw split, so a blank block before the
    nth one shifts which block is read; that is kept.
    """

    instruction_id: ClassVar[str] = "length_constraints:nth_paragraph_first_word"
    num_paragraphs: int
    nth_paragraph: int
    first_word: str

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> NthParagraphFirstWord:
        """From `num_paragraphs`, `nth_paragraph` (1-based) and `first_word` (lowercased)."""
        kept = present(kwargs, ("num_paragraphs", "nth_paragraph", "first_word"), cls.instruction_id)
        num = threshold(kept.get("num_paragraphs"), ctx, 1, _MAX_PARAGRAPHS)
        nth = kept.get("nth_paragraph")
        if nth is None or nth <= 0 or nth > num:
            nth = ctx.rng.randint(1, num + 1)
        if "first_word" not in kept:
            raise InstructionError(f"{cls.instruction_id}: kwarg 'first_word' is required")
        return cls(num, int(nth), str(kept["first_word"]).lower())

    def check(self, response: str) -> bool:
        """Count blocks, read the nth block's first word, compare both."""
        blocks = response.split("\n\n")
        count = sum(1 for block in blocks if block.strip())
        if self.nth_paragraph > count:
            return False
        block = blocks[self.nth_paragraph - 1].strip()
        if not block:
            return False
        return count == self.num_paragraphs and first_word(block) == self.first_word
