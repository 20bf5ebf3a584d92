"""`startend:*`: a closing phrase; the whole response in double quotes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ifeval_scorer.rule import Context, InstructionError, present


@dataclass(frozen=True)
class EndChecker:
    """The response ends with `end_phrase`, ignoring case, outer whitespace and outer `"` marks."""

    instruction_id: ClassVar[str] = "startend:end_checker"
    end_phrase: str

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> EndChecker:
        """From `end_phrase`."""
        kept = present(kwargs, ("end_phrase",), cls.instruction_id)
        if "end_phrase" not in kept:
            raise InstructionError(f"{cls.instruction_id}: kwarg 'end_phrase' is required")
        return cls(str(kept["end_phrase"]).strip().lower())

    def check(self, response: str) -> bool:
        """Suffix test on the stripped, unquoted, lowercased response."""
        return response.strip().strip('"').lower().endswith(self.end_phrase)


@dataclass(frozen=True)
class Quotation:
    """After stripping whitespace, the response is at least two characters and starts and ends with `"`."""

    instruction_id: ClassVar[str] = "startend:quotation"

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> Quotation:
        """No kwargs."""
        present(kwargs, (), cls.instruction_id)
        return cls()

    def check(self, response: str) -> bool:
        """Look at the first and last characters."""
        text = response.strip()
        return len(text) > 1 and text[0] == '"' and text[-1] == '"'
