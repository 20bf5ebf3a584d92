"""`combination:*`: two different answers split by `******`; repeating the request first."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ifeval_scorer.rule import Context, InstructionError, present

SEPARATOR = "******"


@dataclass(frozen=True)
class TwoResponses:
    """Exactly two non-blank, different answers separated by `******` (blank only at the ends)."""

    instruction_id: ClassVar[str] = "combination:two_responses"

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> TwoResponses:
        """No kwargs."""
        present(kwargs, (), cls.instruction_id)
        return cls()

    def check(self, response: str) -> bool:
        """Split on the separator; a blank inner piece fails; two distinct answers pass."""
        pieces = response.split(SEPARATOR)
        last = len(pieces) - 1
        answers: list[str] = []
        for index, piece in enumerate(pieces):
            if piece.strip():
                answers.append(piece.strip())
            elif index not in (0, last):
                return False
        return len(answers) == 2 and answers[0] != answers[1]


@dataclass(frozen=True)
class RepeatPrompt:
    """The response starts with `prompt_to_repeat`, ignoring case and surrounding whitespace."""

    instruction_id: ClassVar[str] = "combination:repeat_prompt"
    prefix: str

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> RepeatPrompt:
        """From `prompt_to_repeat` (required)."""
        kept = present(kwargs, ("prompt_to_repeat",), cls.instruction_id)
        if "prompt_to_repeat" not in kept:
            raise InstructionError(f"{cls.instruction_id}: prompt_to_repeat must be set")
        return cls(str(kept["prompt_to_repeat"]).strip().lower())

    def check(self, response: str) -> bool:
        """Prefix test on the stripped, lowercased response."""
        return response.strip().lower().startswith(self.prefix)
