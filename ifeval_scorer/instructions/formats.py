"""`detectable_format:*`: bullets, fixed answers, highlights, sections, JSON and titles."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ifeval_scorer.rule import Context, InstructionError, present, threshold

_MAX_BULLETS = 5
_MAX_HIGHLIGHTS = 4
_MAX_SECTIONS = 5
_STAR_BULLET = re.compile(r"^\s*\*[^\*].*$", re.MULTILINE)
_DASH_BULLET = re.compile(r"^\s*-.*$", re.MULTILINE)
_SINGLE_HIGHLIGHT = re.compile(r"\*[^\n\*]*\*")
_DOUBLE_HIGHLIGHT = re.compile(r"\*\*[^\n\*]*\*\*")
_JSON_FENCES = ("```json", "```Json", "```JSON", "```")
ANSWER_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


@dataclass(frozen=True)
class NumberBulletLists:
    """Exactly `num_bullets` lines that start (after whitespace) with `* ` style or `-` bullets.

    As upstream's multiline regex, the leading `\\s*` may run over blank lines, and a `*` bullet
    needs a character after the star that is not another star.
    """

    instruction_id: ClassVar[str] = "detectable_format:number_bullet_lists"
    num_bullets: int

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> NumberBulletLists:
        """From `num_bullets`."""
        kept = present(kwargs, ("num_bullets",), cls.instruction_id)
        return cls(threshold(kept.get("num_bullets"), ctx, 1, _MAX_BULLETS))

    def check(self, response: str) -> bool:
        """Count both kinds of bullet and compare for equality."""
        count = len(_STAR_BULLET.findall(response)) + len(_DASH_BULLET.findall(response))
        return count == self.num_bullets


@dataclass(frozen=True)
class ConstrainedResponse:
    """The response contains one of the three "My answer is ..." sentences."""

    instruction_id: ClassVar[str] = "detectable_format:constrained_response"

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> ConstrainedResponse:
        """No kwargs."""
        present(kwargs, (), cls.instruction_id)
        return cls()

    def check(self, response: str) -> bool:
        """Substring search for each option."""
        text = response.strip()
        return any(option in text for option in ANSWER_OPTIONS)


def count_highlights(response: str) -> int:
    """`*x*` spans with non-blank content, plus `**x**` spans with non-blank content, on one line.

    Upstream counts both patterns independently, so a bold span can count once or twice.
    """
    single = sum(1 for span in _SINGLE_HIGHLIGHT.findall(response) if span.strip("*").strip())
    double = sum(1 for span in _DOUBLE_HIGHLIGHT.findall(response) if span[2:-2].strip())
    return single + double


@dataclass(frozen=True)
class NumberHighlightedSections:
    """At least `num_highlights` highlighted spans (see `count_highlights`)."""

    instruction_id: ClassVar[str] = "detectable_format:number_highlighted_sections"
    num_highlights: int

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> NumberHighlightedSections:
        """From `num_highlights`."""
        kept = present(kwargs, ("num_highlights",), cls.instruction_id)
        return cls(threshold(kept.get("num_highlights"), ctx, 1, _MAX_HIGHLIGHTS))

    def check(self, response: str) -> bool:
        """Count and compare."""
        return count_highlights(response) >= self.num_highlights


@dataclass(frozen=True)
class MultipleSections:
    """At least `num_sections` section markers: the splitter word (a regex), then a number."""

    instruction_id: ClassVar[str] = "detectable_format:multiple_sections"
    splitter: re.Pattern[str]
    num_sections: int

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> MultipleSections:
        """From `section_spliter` (upstream's spelling; stripped) and `num_sections`."""
        kept = present(kwargs, ("section_spliter", "num_sections"), cls.instruction_id)
        word = kept.get("section_spliter")
        if word is None:
            raise InstructionError(f"{cls.instruction_id}: kwarg 'section_spliter' is required")
        num = threshold(kept.get("num_sections"), ctx, 1, _MAX_SECTIONS)
        return cls(re.compile(r"\s?" + str(word).strip() + r"\s?\d+\s?"), num)

    def check(self, response: str) -> bool:
        """Split on the markers; the pieces after the first are the sections."""
        return len(self.splitter.split(response)) - 1 >= self.num_sections


def strip_json_fences(response: str) -> str:
    """Upstream's unwrapping: strip, drop the fence prefixes in turn, drop a closing fence, strip."""
    text = response.strip()
    for fence in _JSON_FENCES:
        text = text.removeprefix(fence)
    return text.removesuffix("```").strip()


@dataclass(frozen=True)
class JsonFormat:
    """After removing markdown fences, the whole response parses as JSON."""

    instruction_id: ClassVar[str] = "detectable_format:json_format"

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> JsonFormat:
        """No kwargs."""
        present(kwargs, (), cls.instruction_id)
        return cls()

    def check(self, response: str) -> bool:
        """Try to parse."""
        try:
            json.loads(strip_json_fences(response))
        except ValueError:
            return False
        except RecursionError:  # nested deeper than Python's decoder recurses: the reference crashes
            return False
        return True


@dataclass(frozen=True)
class Title:
    """A title `<<...>>` on one line with non-blank text inside."""

    instruction_id: ClassVar[str] = "detectable_format:title"

    @classmethod
    def build(cls, kwargs: Mapping[str, Any], ctx: Context) -> Title:
        """No kwargs."""
        present(kwargs, (), cls.instruction_id)
        return cls()

    def check(self, response: str) -> bool:
        """Find `<<...>>` spans; one whose inside is not blank after dropping angle brackets passes."""
        return any(span.lstrip("<").rstrip(">").strip() for span in title_spans(response))


def title_spans(response: str) -> list[str]:
    """What upstream's `re.findall(r"<<[^\n]+>>", response)` finds, in linear time (the regex
    backtracks quadratically: 80 KB of `<` took 23 s). The pattern cannot cross a newline and its
    greedy middle runs to the line's last `>>`, so each line holds at most one span: from the line's
    first `<<` to its last `>>`, when at least one character lies between them."""
    spans = []
    for line in response.split("\n"):
        start = line.find("<<")
        if start < 0:
            continue
        end = line.rfind(">>")
        if end >= start + 3:
            spans.append(line[start : end + 2])
    return spans
