"""Instruction id -> rule class: the 25 instructions IFEval's registry enables, ids exactly as upstream."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ifeval_scorer.instructions import (
    case,
    combination,
    content,
    formats,
    keywords,
    language,
    length,
    punctuation,
    startend,
)
from ifeval_scorer.rule import Context, InstructionError, Rule


class RuleClass(Protocol):
    """A rule class: its id and a `build(kwargs, ctx)` constructor."""

    instruction_id: str

    def build(self, kwargs: Mapping[str, Any], ctx: Context) -> Rule:
        """Build the rule from the prompt file's kwargs."""
        ...


_CLASSES: tuple[Any, ...] = (
    keywords.Existence,
    keywords.Frequency,
    keywords.ForbiddenWords,
    keywords.LetterFrequency,
    language.ResponseLanguage,
    length.NumberSentences,
    length.NumberParagraphs,
    length.NumberWords,
    length.NthParagraphFirstWord,
    content.NumberPlaceholders,
    content.Postscript,
    formats.NumberBulletLists,
    formats.ConstrainedResponse,
    formats.NumberHighlightedSections,
    formats.MultipleSections,
    formats.JsonFormat,
    formats.Title,
    combination.TwoResponses,
    combination.RepeatPrompt,
    startend.EndChecker,
    case.CapitalWordFrequency,
    case.EnglishCapital,
    case.EnglishLowercase,
    punctuation.NoComma,
    startend.Quotation,
)

REGISTRY: Mapping[str, RuleClass] = {cls.instruction_id: cls for cls in _CLASSES}
INSTRUCTION_IDS: tuple[str, ...] = tuple(REGISTRY)


def category(instruction_id: str) -> str:
    """The family of an instruction id: the part before the colon (`keywords`, `detectable_format`, ...)."""
    return instruction_id.split(":", 1)[0]


def build_rule(instruction_id: str, kwargs: Mapping[str, Any], ctx: Context) -> Rule:
    """Build the rule for one instruction of a prompt; an unknown id is an `InstructionError`."""
    cls = REGISTRY.get(instruction_id)
    if cls is None:
        raise InstructionError(f"unknown instruction id {instruction_id!r}")
    return cls.build(kwargs, ctx)
