"""`language:response_language`: langdetect names the required language for the whole response."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ifeval_scorer.rule import Context, InstructionError, present


@dataclass(frozen=True)
class ResponseLanguage:
    """langdetect's top language equals `language`; text it cannot classify passes, as upstream."""

    instruction_id: ClassVar[str] = "language:response_language"
    language: str
    detect: Callable[[str], str | None]

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> ResponseLanguage:
        """From `language`, an ISO 639-1 code such as `it` or `hi`."""
        kept = present(kwargs, ("language",), cls.instruction_id)
        if "language" not in kept:
            raise InstructionError(f"{cls.instruction_id}: kwarg 'language' is required")
        return cls(str(kept["language"]), ctx.detect)

    def check(self, response: str) -> bool:
        """Detect and compare (undetectable: True)."""
        found = self.detect(response)
        return found is None or found == self.language
