"""`capsule score` and a run's score stage write one format: the same generations give the same bytes."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from reference_runs import V2_RUN

from capsule.cli import cli

REPO = Path(__file__).resolve().parents[2]
REFERENCE_RUN = V2_RUN  # a committed, signed run
ARM = "hf-s64-b48"  # a 64-prompt arm: quick to score


def test_capsule_score_writes_the_bytes_the_reference_run_stores(tmp_path: Path, prompts_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    generations = REFERENCE_RUN / "generations" / f"{ARM}.jsonl"
    arguments = ["score", str(generations), "-o", str(out), "--seed", "0", "--prompts", str(prompts_path)]
    result = CliRunner().invoke(cli, arguments)  # seed 0: the reference plan's scorer_seed
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == (REFERENCE_RUN / "scores" / f"{ARM}.jsonl").read_bytes()
