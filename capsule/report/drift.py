"""What differs between a region and its rendering: facts (numbers and verdict words) one by one,
then, where they all agree, the words (`capsule.report.numbers` explains the two passes)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from capsule.report.regions import Region

#: A fact: a verdict word in capitals, or a number (sign, decimals, exponent) not glued to a word.
FACT = re.compile(
    r"NOT REPRODUCED|NOT RUN\b|\b(?:REPRODUCED|UNDERPOWERED|FAILED|DIFFER|INDISTINGUISHABLE)\b"
    r"|(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])"
)


@dataclass(frozen=True)
class Drift:
    """A fact that differs: where, what the file says and what the run gives (None: absent)."""

    path: Path
    line: int
    block: str
    found: str | None
    expected: str | None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line} (block {self.block})"
        if self.found is None:
            return f"{where}: missing {self.expected}, which the run gives here"
        if self.expected is None:
            return f"{where}: found {self.found}, which the run does not give"
        return f"{where}: found {self.found}, expected {self.expected}"


def facts(lines: list[str], first_line: int = 1) -> list[tuple[int, str]]:
    """(line number, fact) for every fact in `lines`, in reading order."""
    return [(first_line + i, m.group(0)) for i, line in enumerate(lines) for m in FACT.finditer(line)]


def compare(region: Region, rendered: str) -> list[Drift]:
    """The drifts between a region's body and the block as rendered now, fact by fact."""
    found = facts(region.body, region.open_line + 1)
    expected = [fact for _, fact in facts(rendered.split("\n"))]
    drifts: list[Drift] = []
    matcher = difflib.SequenceMatcher(None, [f for _, f in found], expected, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        span = max(i2 - i1, j2 - j1)
        for offset in range(span):
            i, j = i1 + offset, j1 + offset
            if i < i2:
                line = found[i][0]
            elif i2 > i1:  # more expected than found: after the last fact replaced
                line = found[i2 - 1][0]
            elif i1 > 0:  # only missing facts: just after the fact found before them
                line = found[i1 - 1][0]
            else:
                line = found[0][0] if found else region.close_line
            drifts.append(
                Drift(
                    region.path,
                    line,
                    region.block,
                    found[i][1] if i < i2 else None,
                    expected[j] if j < j2 else None,
                )
            )
    return drifts


@dataclass(frozen=True)
class WordDrift:
    """The first words of a region that differ from the rendering (the region's facts all match)."""

    path: Path
    line: int
    block: str
    found: str  # the region's words there ("" when the region lacks words the run gives)
    expected: str  # the rendering's words there ("" when the region has words the run does not give)

    def __str__(self) -> str:
        where = f"{self.path}:{self.line} (block {self.block}): the text differs from what the run renders"
        if not self.found:
            return f"{where}: missing {self.expected!r}"
        if not self.expected:
            return f"{where}: found {self.found!r}, which the run does not give"
        return f"{where}: found {self.found!r}, expected {self.expected!r}"


_SHOWN_WORDS = 6  # how many differing words a WordDrift quotes, each side


def words(lines: list[str], first_line: int = 1) -> list[tuple[int, str]]:
    """(line number, word) for every whitespace-separated word of `lines`, in reading order."""
    return [(first_line + i, word) for i, line in enumerate(lines) for word in line.split()]


def compare_words(region: Region, rendered: str) -> WordDrift | None:
    """The first difference between the region's words and the rendering's, or None if they agree."""
    found = words(region.body, region.open_line + 1)
    expected = [word for _, word in words(rendered.split("\n"))]
    matcher = difflib.SequenceMatcher(None, [w for _, w in found], expected, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        line = found[min(i1, len(found) - 1)][0] if found else region.close_line
        return WordDrift(
            region.path, line, region.block,
            " ".join(w for _, w in found[i1:i2][:_SHOWN_WORDS]), " ".join(expected[j1:j2][:_SHOWN_WORDS]),
        )
    return None
