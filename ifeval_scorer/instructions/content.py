"""`detectable_content:*`: `[placeholder]` counts and a postscript marker."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ifeval_scorer.rule import Context, InstructionError, present, threshold

_MAX_PLACEHOLDERS = 4
_PLACEHOLDER = re.compile(r"\[.*?\]")


@dataclass(frozen=True)
class NumberPlaceholders:
    """At least `num_placeholders` bracketed spans `[...]` (shortest match, within one line)."""

    instruction_id: ClassVar[str] = "detectable_content:number_placeholders"
    num_placeholders: int

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> NumberPlaceholders:
        """From `num_placeholders`."""
        kept = present(kwargs, ("num_placeholders",), cls.instruction_id)
        return cls(threshold(kept.get("num_placeholders"), ctx, 1, _MAX_PLACEHOLDERS))

    def check(self, response: str) -> bool:
        """Count the spans and compare."""
        return len(_PLACEHOLDER.findall(response)) >= self.num_placeholders


def postscript_pattern(marker: str) -> re.Pattern[str]:
    """The pattern upstream searches the lowercased response for, line by line.

    `P.S.` and `P.P.S` allow a space after each dot; any other marker is used as a regex, lowercased.
    """
    if marker == "P.P.S":
        body = r"p\.\s?p\.\s?s"
    elif marker == "P.S.":
        body = r"p\.\s?s\."
    else:
        body = marker.lower()
    return re.compile(r"\s*" + body + r".*$", re.MULTILINE)


@dataclass(frozen=True)
class Postscript:
    """The (lowercased) response contains the postscript marker."""

    instruction_id: ClassVar[str] = "detectable_content:postscript"
    pattern: re.Pattern[str]

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> Postscript:
        """From `postscript_marker` (stripped)."""
        kept = present(kwargs, ("postscript_marker",), cls.instruction_id)
        marker = kept.get("postscript_marker")
        if marker is None:
            raise InstructionError(f"{cls.instruction_id}: kwarg 'postscript_marker' is required")
        return cls(postscript_pattern(str(marker).strip()))

    def check(self, response: str) -> bool:
        """Search the lowercased response."""
        return self.pattern.search(response.lower()) is not None
