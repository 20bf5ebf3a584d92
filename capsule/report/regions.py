"""The marked regions of a Markdown file: `<!-- capsule:numbers run=RUN block=BLOCK -->` ...
`<!-- /capsule:numbers -->`, found and parsed with their line numbers (`capsule.report.numbers` says
what a check does with them). A malformed marker is one BadInputError naming its file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from capsule.errors import BadInputError
from capsule.report.comparison import COMPARISON_BLOCKS
from capsule.report.document import BLOCKS

OPEN = re.compile(r"<!--\s*capsule:numbers\b(?P<attrs>.*?)-->")
CLOSE = re.compile(r"<!--\s*/capsule:numbers\s*-->")
ATTR = re.compile(r"(\w+)=(\S+)")
ATTRIBUTES = ("run", "block", "against")


@dataclass(frozen=True)
class Region:
    """One marked region: the line numbers (1-based) of its markers, its attributes and body."""

    path: Path
    open_line: int
    close_line: int
    run: str | None
    block: str
    body: list[str]
    against: str | None = None  # a second run: the region quotes the two runs' comparison

    def run_dir(self, override: Path | None = None) -> Path:
        """The run this region is checked against: `override`, else `run=` relative to the file."""
        if override is not None:
            return override
        if self.run is None:
            raise BadInputError(
                f"{self.path}:{self.open_line}: marker names no run=; add run=DIR or pass --run"
            )
        return (self.path.parent / self.run).resolve()

    def against_dir(self) -> Path:
        """The second run of a comparison region, relative to the file."""
        assert self.against is not None
        return (self.path.parent / self.against).resolve()


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
            known, kind = (
                (COMPARISON_BLOCKS, "comparison block (a region with against=)") if "against" in attrs
                else (BLOCKS, "report block")
            )
            if attrs.get("block") not in known:
                raise BadInputError(
                    f"{path}:{number}: block={attrs.get('block')!r} is not a {kind}; "
                    f"use one of: {', '.join(known)}"
                )
            if "against" in attrs and "run" not in attrs:
                raise BadInputError(f"{path}:{number}: a region with against= needs run= too")
            opened = (number, attrs)
        elif end:
            if opened is None:
                raise BadInputError(
                    f"{path}:{number}: a closing capsule:numbers marker without an opening one"
                )
            first, attrs = opened
            regions.append(
                Region(
                    path, first, number, attrs.get("run"), attrs["block"], lines[first : number - 1],
                    attrs.get("against"),
                )
            )
            opened = None
    if opened is not None:
        raise BadInputError(
            f"{path}:{opened[0]}: capsule:numbers region is never closed (<!-- /capsule:numbers -->)"
        )
    return regions
