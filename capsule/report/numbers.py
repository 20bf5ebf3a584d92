"""Numbers that cannot drift: marked Markdown regions re-rendered from a run and compared.

A region is the text between

    <!-- capsule:numbers run=results/smollm2-135m/RUNID block=headline -->
    <!-- /capsule:numbers -->

`run=` is the run directory, relative to the Markdown file's own directory (`.` in RESULTS.md);
`block=` names a renderer in `capsule.report.document.BLOCKS`. The check re-renders the block from the
run's analysis.json (and manifest.json) and compares it with the region whole, in two passes:

- the *facts* in order: every number as printed (`16.96`, `1/8` is two, `1e-05` one) and every
  verdict word in capitals (REPRODUCED, NOT REPRODUCED, UNDERPOWERED, FAILED, DIFFER,
  INDISTINGUISHABLE); a fact that differs, is missing or is extra is drift, named one by one;
- then, in a region whose facts all match, every word: the claims around the numbers ("excludes",
  "above", "the seed") are rendered from analysis.json too, so a changed word is drift as well,
  reported once with the first words that differ. Only line breaks and spacing may differ.

`update_file` rewrites regions in place from the run, so keeping a README current is one command.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from capsule.atomic import write_text_atomic
from capsule.errors import BadInputError
from capsule.report.document import BLOCKS, ReportInput, load_run, render_block

OPEN = re.compile(r"<!--\s*capsule:numbers\b(?P<attrs>.*?)-->")
CLOSE = re.compile(r"<!--\s*/capsule:numbers\s*-->")
ATTR = re.compile(r"(\w+)=(\S+)")
ATTRIBUTES = ("run", "block")
#: A fact: a verdict word in capitals, or a number (sign, decimals, exponent) not glued to a word.
FACT = re.compile(
    r"NOT REPRODUCED|\b(?:REPRODUCED|UNDERPOWERED|FAILED|DIFFER|INDISTINGUISHABLE)\b"
    r"|(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])"
)


@dataclass(frozen=True)
class Region:
    """One marked region: the line numbers (1-based) of its markers, its attributes and body."""

    path: Path
    open_line: int
    close_line: int
    run: str | None
    block: str
    body: list[str]

    def run_dir(self, override: Path | None = None) -> Path:
        """The run this region is checked against: `override`, else `run=` relative to the file."""
        if override is not None:
            return override
        if self.run is None:
            raise BadInputError(
                f"{self.path}:{self.open_line}: marker names no run=; add run=DIR or pass --run"
            )
        return (self.path.parent / self.run).resolve()


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


def find_regions(path: Path, text: str) -> list[Region]:
    """Every marked region of `text` (read from `path`); BadInputError for unclosed or nested
    markers, unknown attributes or blocks, naming the file and line."""
    regions: list[Region] = []
    lines = text.split("\n")
    opened: tuple[int, dict[str, str]] | None = None
    for number, line in enumerate(lines, start=1):
        start, end = OPEN.search(line), CLOSE.search(line)
        if start:
            if opened is not None:
                raise BadInputError(
                    f"{path}:{number}: a capsule:numbers region opens inside the one at line {opened[0]}"
                )
            attrs = dict(ATTR.findall(start.group("attrs")))
            unknown = sorted(set(attrs) - set(ATTRIBUTES))
            if unknown:
                raise BadInputError(
                    f"{path}:{number}: unknown marker attribute(s) {', '.join(unknown)}; "
                    f"allowed: {', '.join(ATTRIBUTES)}"
                )
            if attrs.get("block") not in BLOCKS:
                raise BadInputError(
                    f"{path}:{number}: block={attrs.get('block')!r} is not a report block; "
                    f"use one of: {', '.join(BLOCKS)}"
                )
            opened = (number, attrs)
        elif end:
            if opened is None:
                raise BadInputError(
                    f"{path}:{number}: a closing capsule:numbers marker without an opening one"
                )
            first, attrs = opened
            regions.append(
                Region(path, first, number, attrs.get("run"), attrs["block"], lines[first : number - 1])
            )
            opened = None
    if opened is not None:
        raise BadInputError(
            f"{path}:{opened[0]}: capsule:numbers region is never closed (<!-- /capsule:numbers -->)"
        )
    return regions


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


@dataclass(frozen=True)
class CheckResult:
    """What `check_files` looked at and what drifted."""

    regions: int
    facts: int
    drifts: list[Drift | WordDrift]
    words: int = 0


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise BadInputError(f"{path}: cannot read ({error})") from error


def check_files(paths: list[Path], run: Path | None = None) -> CheckResult:
    """Check every marked region of `paths` against its run (or `run` for all of them): its facts
    one by one, then, where they all match, its words (see the module docstring).

    A file without any region is an error: checking it would prove nothing.
    """
    cache: dict[Path, ReportInput] = {}
    regions = facts_total = words_total = 0
    drifts: list[Drift | WordDrift] = []
    for path in paths:
        found = find_regions(path, _read(path))
        if not found:
            raise BadInputError(f"{path}: no <!-- capsule:numbers run=... block=... --> regions to check")
        for region in found:
            run_dir = region.run_dir(run)
            data = cache.setdefault(run_dir, load_run(run_dir))
            rendered = render_block(region.block, data)
            fact_drifts = compare(region, rendered)
            word_drift = None if fact_drifts else compare_words(region, rendered)
            drifts += fact_drifts + ([word_drift] if word_drift else [])
            regions += 1
            facts_total += len(facts(region.body))
            words_total += len(words(region.body))
    return CheckResult(regions, facts_total, drifts, words_total)


def update_text(path: Path, text: str, run_dir: Path) -> tuple[str, int]:
    """`text` with every region whose run is `run_dir` re-rendered from it; (new text, regions rewritten)."""
    target = run_dir.resolve()
    regions = [r for r in find_regions(path, text) if r.run is None or r.run_dir() == target]
    if not regions:
        return text, 0
    data = load_run(run_dir)
    lines = text.split("\n")
    out: list[str] = []
    position = 0
    for region in regions:
        out += lines[position : region.open_line]
        out += render_block(region.block, data).split("\n")
        position = region.close_line - 1
    out += lines[position:]
    return "\n".join(out), len(regions)


def update_file(path: Path, run_dir: Path) -> int:
    """Rewrite the regions of `path` that name `run_dir` (or no run) from it; return how many.

    BadInputError when none does, so a mistyped run path is not a silent no-op."""
    text = _read(path)
    new, rewritten = update_text(path, text, run_dir)
    if rewritten == 0:
        raise BadInputError(
            f"{path}: no capsule:numbers region names run {run_dir}; "
            "add <!-- capsule:numbers run=PATH block=NAME --> <!-- /capsule:numbers -->"
        )
    if new != text:
        write_text_atomic(path, new)
    return rewritten
