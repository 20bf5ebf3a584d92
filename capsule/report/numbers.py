"""Numbers that cannot drift: marked Markdown regions re-rendered from a run and compared.

A region is the text between

    <!-- capsule:numbers run=results/smollm2-135m/RUNID block=headline -->
    <!-- /capsule:numbers -->

`run=` is the run directory, relative to the Markdown file's own directory (`.` in RESULTS.md);
`block=` names a renderer in `capsule.report.document.BLOCKS`. The check re-renders the block from the
run's analysis.json (and manifest.json) and compares it with the region whole, in two passes:

- the *facts* in order: every number as printed (`16.96`, `1/8` is two, `1e-05` one) and every
  verdict word in capitals (REPRODUCED, NOT REPRODUCED, NOT RUN, UNDERPOWERED, FAILED, DIFFER,
  INDISTINGUISHABLE); a fact that differs, is missing or is extra is drift, named one by one;
- then, in a region whose facts all match, every word: the claims around the numbers ("excludes",
  "above", "the seed") are rendered from analysis.json too, so a changed word is drift as well,
  reported once with the first words that differ. Only line breaks and spacing may differ.

Why two passes, not the word pass alone: a word diff names the first run of differing words and
stops, and cannot tell a number from a word, so a region where two numbers drifted (a verdict value,
and a count lines further on) would name one, hide the other, and give no value to put back. The
fact pass names every drifted, missing or extra number at its own line with the value the run
gives (tests/unit/test_numbers.py::test_drift_reports_line_found_and_expected); the word pass
runs only where the facts agree, so no drift is reported twice.

A region with `against=OTHER_RUN` quotes two runs of one plan side by side: its block is one of
`capsule.report.comparison.COMPARISON_BLOCKS`, rendered from `capsule compare run against` (both runs
verified first, against the ledger given to the check). Those regions are written by
`capsule compare A B --out FILE` or `--update FILE`.

`update_file` rewrites regions in place from the run, so keeping a README current is one command.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from capsule.atomic import write_text_atomic
from capsule.errors import BadInputError, VerificationError
from capsule.jsonio import read_input_text
from capsule.report.document import ReportInput, load_run, render_block
from capsule.report.drift import Drift, WordDrift, compare, compare_words, facts, words
from capsule.report.regions import Region, find_regions
from capsule.run_dir import RunDir

#: Renders a comparison block: (block, run A, run B, the names the marker gives them) -> text.
#: The commands pass `capsule.evidence.compare.render_comparison_block`, which verifies both runs.
ComparisonRenderer = Callable[[str, Path, Path, tuple[str, str]], str]


@dataclass(frozen=True)
class CheckResult:
    """What `check_files` looked at and what drifted."""

    regions: int
    facts: int
    drifts: list[Drift | WordDrift]
    words: int = 0
    #: Files given with no region at all (documentation pages that quote no run), checked for nothing.
    unquoted: tuple[Path, ...] = ()
    verified: int = 0  # the regions' signed runs verified (signature, files, trust; dry runs refused)


def _read(path: Path) -> str:
    return read_input_text(path, "document")


def require_signed(region: Region, run_dir: Path) -> None:
    """A region's run must be signed (VerificationError, exit 3, naming the region): the numbers of an
    unsigned run are whatever its analysis.json says now, edited with its RESULTS.md or not."""
    if not RunDir(run_dir).envelope.is_file():
        raise VerificationError(
            f"{region.path}:{region.open_line}: quotes run {run_dir}, which is not signed (no "
            f"{RunDir(run_dir).envelope.name}): an unsigned run's numbers are not evidence; quote a signed "
            "run (finish this one with `capsule reproduce`)"
        )


def check_files(paths: list[Path], run: Path | None = None, comparison: ComparisonRenderer | None = None,
                verify: Callable[[Path], object] | None = None) -> CheckResult:
    """Check every marked region of `paths` against its run (or `run` for every one-run region): its
    facts one by one, then, where they all match, its words (see the module docstring). A comparison
    region (against=) is checked against its own two runs, rendered by `comparison`. `verify`: called
    once on each one-run region's run (it raises for a run that does not verify, an untrusted signer
    among the reasons); a region quoting a run with no signature fails (VerificationError, exit 3):
    an unsigned run's numbers can be edited with its analysis and report, so they are not evidence.

    Files without a region are allowed beside files with one, so a whole set of pages
    (`README.md docs/*.md`) can be checked as the pages come and go; they are named in the result.
    But when no file holds a region it is an error: checking them would prove nothing, and a check
    that passes on nothing (a wrong file name, every marker deleted) must not look like a pass.
    """
    cache: dict[Path, ReportInput] = {}
    checked: set[Path] = set()
    regions = facts_total = words_total = 0
    drifts: list[Drift | WordDrift] = []
    unquoted: list[Path] = []
    for path in paths:
        found = find_regions(path, _read(path))
        if not found:
            unquoted.append(path)
        for region in found:
            if region.against is not None:
                rendered = _render_comparison_region(region, comparison)
                checked.update((region.run_dir(), region.against_dir()))  # both verified by `comparison`
            else:
                run_dir = region.run_dir(run)
                if verify is not None and run_dir not in checked:
                    checked.add(run_dir)
                    require_signed(region, run_dir)
                    verify(run_dir)
                data = cache.setdefault(run_dir, load_run(run_dir))
                rendered = render_block(region.block, data)
            fact_drifts = compare(region, rendered)
            word_drift = None if fact_drifts else compare_words(region, rendered)
            drifts += fact_drifts + ([word_drift] if word_drift else [])
            regions += 1
            facts_total += len(facts(region.body))
            words_total += len(words(region.body))
    if regions == 0:
        named = ", ".join(str(path) for path in paths)
        raise BadInputError(f"{named}: no <!-- capsule:numbers run=... block=... --> regions to check")
    return CheckResult(regions, facts_total, drifts, words_total, verified=len(checked),
                       unquoted=tuple(unquoted))


def _render_comparison_region(region: Region, comparison: ComparisonRenderer | None) -> str:
    """A comparison region's block as its two runs give it now, with the runs named as the marker does."""
    assert region.run is not None and region.against is not None
    if comparison is None:
        raise BadInputError(
            f"{region.path}:{region.open_line}: a comparison region (against=) is checked by "
            "`capsule check-numbers`, which verifies both runs"
        )
    return comparison(region.block, region.run_dir(), region.against_dir(), (region.run, region.against))


def update_comparison_text(path: Path, text: str, run_a: Path, run_b: Path, comparison: ComparisonRenderer
                           ) -> tuple[str, int]:
    """`text` with every comparison region of `run_a` against `run_b` re-rendered; (new text, count)."""
    targets = (run_a.resolve(), run_b.resolve())
    regions = [
        r for r in find_regions(path, text)
        if r.against is not None and (r.run_dir(), r.against_dir()) == targets
    ]
    return _splice(text, regions, lambda region: _render_comparison_region(region, comparison)), len(regions)


def update_text(path: Path, text: str, run_dir: Path) -> tuple[str, int]:
    """`text` with every one-run region whose run is `run_dir` re-rendered from it; (new text, count)."""
    target = run_dir.resolve()
    regions = [
        r for r in find_regions(path, text)
        if r.against is None and (r.run is None or r.run_dir() == target)
    ]
    if not regions:
        return text, 0
    data = load_run(run_dir)
    return _splice(text, regions, lambda region: render_block(region.block, data)), len(regions)


def _splice(text: str, regions: list[Region], render: Callable[[Region], str]) -> str:
    """`text` with the body of each of `regions` (in file order) replaced by `render(region)`."""
    lines = text.split("\n")
    out: list[str] = []
    position = 0
    for region in regions:
        out += lines[position : region.open_line]
        out += render(region).split("\n")
        position = region.close_line - 1
    out += lines[position:]
    return "\n".join(out)


def update_file(path: Path, run_dir: Path) -> int:
    """Rewrite the regions of `path` that name `run_dir` (or no run) from it; return how many.

    BadInputError when none does, so a mistyped run path is not a silent no-op."""
    text = _read(path)
    new, rewritten = update_text(path, text, run_dir)
    _write_rewritten(
        path, text, new, rewritten,
        f"no capsule:numbers region names run {run_dir}; "
        "add <!-- capsule:numbers run=PATH block=NAME --> <!-- /capsule:numbers -->",
    )
    return rewritten


def update_comparison_file(path: Path, run_a: Path, run_b: Path, comparison: ComparisonRenderer
                           ) -> tuple[int, bool]:
    """Rewrite the comparison regions of `path` that quote `run_a` against `run_b`; (how many, whether
    the file changed). BadInputError when no region quotes them, so a mistyped path is not a silent no-op."""
    text = _read(path)
    new, rewritten = update_comparison_text(path, text, run_a, run_b, comparison)
    _write_rewritten(
        path, text, new, rewritten,
        f"no capsule:numbers region compares {run_a} against {run_b}; "
        "add <!-- capsule:numbers run=A against=B block=comparison --> <!-- /capsule:numbers -->",
    )
    return rewritten, new != text


def _write_rewritten(path: Path, text: str, new: str, rewritten: int, none_found: str) -> None:
    """Write `new` over `path` when it differs from `text`; BadInputError `path: none_found` when no
    region was rewritten, so a mistyped run path is not a silent no-op."""
    if rewritten == 0:
        raise BadInputError(f"{path}: {none_found}")
    if new != text:
        write_text_atomic(path, new)
