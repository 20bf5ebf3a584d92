"""check-numbers: marked regions re-rendered from their run, compared number by number and word for word."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from reference_runs import V2_RUN
from test_report_support import make_run

from capsule.cli import cli
from capsule.errors import BadInputError
from capsule.report.document import load_run, render_block, write_report
from capsule.report.drift import Drift, WordDrift, facts
from capsule.report.numbers import check_files, update_file
from capsule.report.regions import find_regions

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = make_run(tmp_path_factory.mktemp("numbers"))
    write_report(run, plots=False)
    return run


@pytest.fixture
def signed_run(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The committed v2 reference run (signed, in this checkout's ledger), cwd the repository root: the
    command verifies every region's run, and only a signed run is evidence."""
    monkeypatch.chdir(REPO)
    return V2_RUN


def _readme(tmp_path: Path, run: Path, body: str = "", block: str = "headline") -> Path:
    path = tmp_path / "README.md"
    relative = Path("..") / run.parent.name / run.name  # run= is relative to the Markdown file
    path.write_text(
        f"# Title 2026\n\n<!-- capsule:numbers run={relative} block={block} -->\n{body}"
        "<!-- /capsule:numbers -->\n\nOutside 99.\n",
        encoding="utf-8",
    )
    return path


def test_facts_are_numbers_and_verdicts_not_names() -> None:
    line = (
        "hf-bf16-b4 vs smollm2-135m: 16.96 [3.33, 37.98] 1/8 p 1e-05 -0.50 95% "
        "NOT REPRODUCED, DIFFER (differ)"
    )
    assert [f for _, f in facts([line])] == [
        "16.96",
        "3.33",
        "37.98",
        "1",
        "8",
        "1e-05",
        "-0.50",
        "95",
        "NOT REPRODUCED",
        "DIFFER",
    ]
    assert facts(["a", "REPRODUCED UNDERPOWERED"], first_line=10) == [
        (11, "REPRODUCED"),
        (11, "UNDERPOWERED"),
    ]


def test_results_md_regions_match_their_run(run: Path) -> None:
    result = check_files([run / "RESULTS.md"])
    assert result.drifts == [] and result.regions == 5 and result.facts > 100


def test_drift_reports_line_found_and_expected(run: Path, tmp_path: Path) -> None:
    """The case the fact pass exists for: two numbers drifted on two lines are both named, each at
    its line with the value the run gives, where the word pass would quote the first difference only."""
    text = (run / "RESULTS.md").read_text(encoding="utf-8")
    value = render_block("headline", load_run(run)).split("is ")[1].split(",")[0]  # the verdict arm's value
    drifted = tmp_path / "RESULTS.md"
    lines = text.split("\n")
    number = next(i for i, line in enumerate(lines) if line.startswith("**Verdict:"))
    lines[number] = lines[number].replace(f"is {value},", "is 12.34,")
    lines.insert(number + 1, "An extra 7 appeared.")
    drifted.write_text("\n".join(lines), encoding="utf-8")
    drifts = check_files([drifted], run).drifts
    assert [(d.line, d.found, d.expected) for d in drifts] == [
        (number + 1, "12.34", value),
        (number + 2, "7", None),
    ]
    assert str(drifts[0]) == f"{drifted}:{number + 1} (block headline): found 12.34, expected {value}"


def test_a_changed_word_is_drift_but_reflowed_lines_are_not(run: Path, tmp_path: Path) -> None:
    """The claims around the numbers are rendered too: a flipped word fails, naming the region and the
    first words that differ; only line breaks and spacing may change."""
    rendered = render_block("headline", load_run(run))
    word, flipped = "contains", "excludes"
    (drift,) = check_files([_readme(tmp_path, run, rendered.replace(word, flipped, 1) + "\n")]).drifts
    assert isinstance(drift, WordDrift) and (drift.found, drift.expected) == (flipped, word)
    assert str(drift).startswith(f"{tmp_path / 'README.md'}:{drift.line} (block headline): the text differs")
    assert flipped in (tmp_path / "README.md").read_text().split("\n")[drift.line - 1]
    reflowed = "\n".join("  ".join(line.split(" ")) for line in rendered.replace(". ", ".\n").split("\n"))
    assert check_files([_readme(tmp_path, run, reflowed + "\n")]).drifts == []
    (below,) = check_files([_readme(tmp_path, run, rendered.replace("above", "below") + "\n")]).drifts
    assert (below.found, below.expected) == ("below", "above")
    summary = render_block("summary", load_run(run))
    shortened = summary.replace(" on the same metric", "").rsplit(" ", 3)[0]
    drifts = check_files([_readme(tmp_path, run, shortened + "\n", "summary")]).drifts
    assert drifts and all(isinstance(d, Drift) and d.found is None for d in drifts)  # facts reported first


def test_check_numbers_command_names_the_first_differing_words(
    signed_run: Path, tmp_path: Path
) -> None:
    rendered = render_block("summary", load_run(signed_run))
    assert "Changing" in rendered
    path = tmp_path / "README.md"
    path.write_text(
        f"<!-- capsule:numbers run={signed_run} block=summary -->\n"
        f"{rendered.replace('Changing', 'Flipping', 1)}\n<!-- /capsule:numbers -->\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli, ["check-numbers", str(path)])
    assert result.exit_code == 3
    (line,) = [line for line in result.stdout.splitlines() if line]
    assert "(block summary)" in line and "found 'Flipping', expected 'Changing'" in line


def test_update_rewrites_only_regions_of_that_run(run: Path, tmp_path: Path) -> None:
    path = _readme(tmp_path, run, "stale 1.00\n")
    other = "<!-- capsule:numbers run=elsewhere block=arms -->\nkeep 5\n<!-- /capsule:numbers -->\n"
    path.write_text(path.read_text(encoding="utf-8") + other, encoding="utf-8")
    assert update_file(path, run) == 1
    text = path.read_text(encoding="utf-8")
    assert "stale" not in text and "keep 5" in text and "# Title 2026" in text and "Outside 99." in text
    assert render_block("headline", load_run(run)) in text
    with pytest.raises(BadInputError, match="no capsule:numbers region names run"):
        update_file(path, tmp_path)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("<!-- capsule:numbers run=. block=headline -->\n", "never closed"),
        ("<!-- /capsule:numbers -->\n", "without an opening"),
        ("<!-- capsule:numbers run=. block=nope -->\n<!-- /capsule:numbers -->\n", "is not a report block"),
        (
            "<!-- capsule:numbers run=. block=arms colour=red -->\n<!-- /capsule:numbers -->\n",
            "unknown marker",
        ),
        (
            "<!-- capsule:numbers run=. block=arms -->\n<!-- capsule:numbers run=. block=arms -->\n",
            "opens inside",
        ),
    ],
)
def test_bad_markers_name_file_and_line(text: str, match: str) -> None:
    with pytest.raises(BadInputError, match=match):
        find_regions(Path("x.md"), text)


def test_region_without_run_needs_the_run_option(run: Path, tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text(
        f"<!-- capsule:numbers block=summary -->\n{render_block('summary', load_run(run))}\n"
        "<!-- /capsule:numbers -->\n",
        encoding="utf-8",
    )
    with pytest.raises(BadInputError, match="names no run="):
        check_files([path])
    assert check_files([path], run).drifts == []


def test_check_numbers_command(signed_run: Path, tmp_path: Path) -> None:
    """The command on a signed, committed run (an unsigned run's regions fail: test_forgery_checkers):
    ok, then a number changed by hand is drift (exit 3) naming what was found and expected."""
    runner = CliRunner()
    results = signed_run / "RESULTS.md"
    ok = runner.invoke(cli, ["check-numbers", str(results)])
    assert ok.exit_code == 0 and ok.output.startswith("ok: ") and "1 signed run(s) verified" in ok.output
    text = results.read_text(encoding="utf-8")
    first = find_regions(results, text)[0]
    line, fact = facts(first.body, first.open_line + 1)[0]
    lines = text.splitlines(keepends=True)
    lines[line - 1] = lines[line - 1].replace(fact, "999.99", 1)
    drifted = tmp_path / "RESULTS.md"
    drifted.write_text("".join(lines), encoding="utf-8")
    bad = runner.invoke(cli, ["check-numbers", str(drifted), "--run", str(signed_run)])
    assert bad.exit_code == 3 and f"found 999.99, expected {fact}" in bad.output
    plain = tmp_path / "plain.md"
    plain.write_text("no markers 1.0\n", encoding="utf-8")
    assert runner.invoke(cli, ["check-numbers", str(plain)]).exit_code == 2


def test_pages_without_regions_pass_beside_a_page_with_them_but_not_alone(
    signed_run: Path, tmp_path: Path
) -> None:
    """`capsule check-numbers README.md docs/*.md`: a docs page that quotes no run is named, not an
    error; a set of files none of which holds a region still is (it would check nothing)."""
    runner = CliRunner()
    plain = tmp_path / "plain.md"
    plain.write_text("no markers 1.0\n", encoding="utf-8")
    other = tmp_path / "other.md"
    other.write_text("nothing quoted\n", encoding="utf-8")
    results = signed_run / "RESULTS.md"
    ok = runner.invoke(cli, ["check-numbers", str(results), str(plain), str(other)])
    assert ok.exit_code == 0, ok.output
    assert ok.output.splitlines()[-1] == f"no regions in 2 file(s): {plain}, {other}"
    assert check_files([results, plain]).unquoted == (plain,)
    alone = runner.invoke(cli, ["check-numbers", str(plain), str(other)])
    assert alone.exit_code == 2 and "no <!-- capsule:numbers" in alone.output


def test_report_update_command(run: Path, tmp_path: Path) -> None:
    path = _readme(tmp_path, run)
    result = CliRunner().invoke(cli, ["report", str(run), "--update", str(path)])
    assert result.exit_code == 0 and "1 region(s) rewritten" in result.output
    assert check_files([path]).drifts == []
