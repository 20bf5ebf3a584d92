"""`punctuation:no_comma`: no ASCII comma anywhere (other comma characters are allowed, as upstream)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ifeval_scorer.rule import Context, present


@dataclass(frozen=True)
class NoComma:
    """The response contains no `,`."""

    instruction_id: ClassVar[str] = "punctuation:no_comma"

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> NoComma:
        """No kwargs."""
        present(kwargs, (), cls.instruction_id)
        return cls()

    def check(self, response: str) -> bool:
        """Substring test."""
        return "," not in response
