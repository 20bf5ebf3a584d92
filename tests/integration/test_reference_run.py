"""The committed reference runs: each verifies offline, and its analysis.json, RESULTS.md and the
README's checked numbers re-derive byte for byte from the committed generations (no generation)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from capsule.cli import cli
from capsule.evidence.committed_runs import read_committed_runs

REPO = Path(__file__).resolve().parents[2]
COMMITTED = read_committed_runs(REPO)  # by name: results/ may also hold the user's own runs
RUNS = [run.path for run in COMMITTED.runs]

pytestmark = [pytest.mark.slow]  # one core's Python: no model runs


@pytest.mark.parametrize("run", RUNS, ids=[str(run.relative_to(REPO)) for run in RUNS])
def test_reference_run_verifies(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(cli, ["verify", str(run.relative_to(REPO))])
    assert result.exit_code == 0, result.output + result.stderr


@pytest.mark.parametrize("run", RUNS, ids=[str(run.relative_to(REPO)) for run in RUNS])
def test_reference_analysis_rederives(run: Path, tmp_path: Path) -> None:
    from capsule.analysis.codec import write_analysis
    from capsule.artifacts.embedded_model import fetch_model
    from capsule.artifacts.pinned_prompts import fetch_prompts
    from capsule.pipeline.run_start import read_run_start
    from capsule.pipeline.stage_score import derive_analysis, model_tokenizer
    from capsule.prereg.loader import load_plan
    from capsule.run_dir import RunDir
    from ifeval_scorer import load_prompts

    plan = load_plan(REPO / read_run_start(run).plan_path)
    prompts = load_prompts(fetch_prompts().path)
    again = derive_analysis(RunDir(run), plan, prompts, model_tokenizer(fetch_model()[0]), rescore=True)
    write_analysis(tmp_path / "analysis.json", again)
    assert (tmp_path / "analysis.json").read_bytes() == (run / "analysis.json").read_bytes()


@pytest.mark.parametrize("run", RUNS, ids=[str(run.relative_to(REPO)) for run in RUNS])
def test_reference_report_and_readme_numbers(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    report = CliRunner().invoke(cli, ["report", str(run.relative_to(REPO)), "--check"])
    assert report.exit_code == 0, report.output + report.stderr
    pages = [str(page.relative_to(REPO)) for page in sorted((REPO / "docs").glob("*.md"))]
    numbers = CliRunner().invoke(
        cli, ["check-numbers", "README.md", *pages, str(run.relative_to(REPO) / "RESULTS.md")]
    )
    assert numbers.exit_code == 0, numbers.output + numbers.stderr


COMPARISONS = list(COMMITTED.comparisons)


@pytest.mark.parametrize("comparison", COMPARISONS, ids=[str(c.relative_to(REPO)) for c in COMPARISONS])
def test_committed_comparison_matches_its_two_runs(comparison: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(cli, ["check-numbers", str(comparison.relative_to(REPO))])
    assert result.exit_code == 0, result.output + result.stderr


def test_a_comparison_is_committed() -> None:
    """Issue 15's deliverable: at least one committed two-run comparison of a reference plan."""
    assert COMPARISONS, "results/committed.toml names no [comparisons]"
