"""`capsule score` and `python -m ifeval_scorer`: output rows, printed metrics, bad input (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from capsule.cli import cli
from ifeval_scorer import ScorerInputError, score

GOOD = [{"key": 1000, "response": "A reply, with commas."}, {"key": 1001, "response": "Another"}]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_scores_fixture_and_prints_seed0_metrics(tmp_path: Path, gpt4_fixture: Path,
                                                 prompts_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    arguments = ["score", str(gpt4_fixture), "-o", str(out), "--prompts", str(prompts_path)]
    result = CliRunner().invoke(cli, arguments)
    assert result.exit_code == 0, result.output
    for line in ("prompt_level_strict_acc   77.08", "inst_level_strict_acc     83.69",
                 "prompt_level_loose_acc    79.67", "inst_level_loose_acc      85.61"):
        assert line in result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 541
    assert set(rows[0]) == {"key", "instruction_id_list", "strict", "loose"}
    assert set(rows[0]["strict"]) == {"prompt", "instructions"}
    assert len(rows[0]["strict"]["instructions"]) == len(rows[0]["instruction_id_list"])


def test_band_option(tmp_path: Path, gpt4_fixture: Path) -> None:
    result = CliRunner().invoke(cli, ["score", str(gpt4_fixture), "-o", str(tmp_path / "s.jsonl"), "--band"])
    assert result.exit_code == 0, result.output
    assert "prompt_level_strict_acc   76.71 ..  77.08" in result.output
    assert "1122, 1129" in result.output


def test_default_output_path_and_module_entry(tmp_path: Path, prompts_path: Path) -> None:
    generations = _write(tmp_path / "arm.jsonl", [json.dumps(row) for row in GOOD])
    completed = subprocess.run([sys.executable, "-m", "ifeval_scorer", str(generations),
                                "--prompts", str(prompts_path)],
                               capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    assert "prompt_level_strict_acc" in completed.stdout
    assert len((tmp_path / "arm.scores.jsonl").read_text().splitlines()) == 2


def test_module_entry_reports_bad_input_in_one_line(tmp_path: Path, prompts_path: Path) -> None:
    generations = _write(tmp_path / "g.jsonl", ['{"key": 7, "response": "x"}'])
    completed = subprocess.run([sys.executable, "-m", "ifeval_scorer", str(generations),
                                "--prompts", str(prompts_path)],
                               capture_output=True, text=True, check=False)
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [f"Error: {generations}:1: key 7 is not in the IFEval "
                                                     "prompt file"]
    missing = subprocess.run([sys.executable, "-m", "ifeval_scorer", str(generations),
                              "--prompts", str(tmp_path / "nope.jsonl")],
                             capture_output=True, text=True, check=False)
    assert missing.returncode == 2 and "nope.jsonl: prompts file not found" in missing.stderr


@pytest.mark.parametrize(("lines", "message"), [
    (['{"response": "x"}'], "g.jsonl:1: missing `key`"),
    (['{"key": 1000, "response": "x"}', '{"key": 7, "response": "x"}'], "g.jsonl:2: key 7 is not in"),
    (['{"key": 1000, "response": "x"}', "", '{"key": 1000, "response": "y"}'],
     "g.jsonl:3: duplicate key 1000"),
    (['{"key": 1000, "response": 5}'], "g.jsonl:1: key 1000: `response` is a int, not a string"),
    (['{"key": 1000}'], "g.jsonl:1: key 1000: `response` is missing"),
    (["{not json"], "g.jsonl:1: not valid JSON"),
])
def test_bad_input_names_file_line_key_and_writes_nothing(tmp_path: Path, lines: list[str],
                                                          message: str) -> None:
    generations = _write(tmp_path / "g.jsonl", lines)
    out = tmp_path / "out.jsonl"
    out.write_text("untouched")
    result = CliRunner().invoke(cli, ["score", str(generations), "-o", str(out)])
    assert result.exit_code == 2
    assert message in result.output
    assert out.read_text() == "untouched"


def test_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    generations = _write(tmp_path / "g.jsonl", [json.dumps(row) for row in GOOD])
    result = CliRunner().invoke(cli, ["score", str(generations), "-o", str(generations)])
    assert result.exit_code == 2 and "overwrite" in result.output


def test_out_is_the_option_name_and_output_a_hidden_deprecated_alias(tmp_path: Path) -> None:
    generations = _write(tmp_path / "g.jsonl", [json.dumps(row) for row in GOOD])
    assert "--out" in CliRunner().invoke(cli, ["score", "--help"]).output
    assert "--output" not in CliRunner().invoke(cli, ["score", "--help"]).output
    new = CliRunner().invoke(cli, ["score", str(generations), "--out", str(tmp_path / "new.jsonl")])
    old = CliRunner().invoke(cli, ["score", str(generations), "--output", str(tmp_path / "old.jsonl")])
    assert new.exit_code == 0 and old.exit_code == 0
    assert "deprecated" in old.output and "use --out" in old.output
    assert (tmp_path / "new.jsonl").read_bytes() == (tmp_path / "old.jsonl").read_bytes()
    both = CliRunner().invoke(
        cli, ["score", str(generations), "--out", str(tmp_path / "a"), "--output", str(tmp_path / "b")]
    )
    assert both.exit_code == 2 and "disagree" in both.output


def test_api_validates_rows(prompts_path: Path) -> None:
    with pytest.raises(ScorerInputError, match="row 2: duplicate key 1000"):
        score([GOOD[0], GOOD[0]], prompts=prompts_path)
    with pytest.raises(ScorerInputError, match="row 1: key True is not an integer"):
        score([{"key": True, "response": "x"}], prompts=prompts_path)


def test_unseeded_scores_are_valid(prompts_path: Path) -> None:
    scores = score(GOOD, seed=None, prompts=prompts_path)
    assert scores.seed is None and len(scores.rows) == 2
    assert set(scores.per_category("loose")) <= {"punctuation", "detectable_format", "length_constraints",
                                                  "keywords", "change_case", "startend", "combination",
                                                  "detectable_content", "language"}


def test_scorer_errors_become_one_line_and_an_exit_code() -> None:
    import click

    from capsule.cli import CapsuleGroup
    from ifeval_scorer import ScorerError, ScorerInputError, ScorerVerificationError

    raised: dict[str, Exception] = {
        "input": ScorerInputError("g.jsonl:4: key 9 is not in the IFEval prompt file"),
        "data": ScorerVerificationError("english.py: sha256 00, expected 55"),
        "other": ScorerError("something the scorer cannot do"),
        "bug": RuntimeError("not the user's problem"),
    }
    group = CapsuleGroup("capsule")
    for name, error in raised.items():
        def fail(error: Exception = error) -> None:
            raise error
        group.add_command(click.Command(name, callback=fail))
    outcomes = {name: CliRunner().invoke(group, [name]) for name in raised}
    assert outcomes["input"].exit_code == 2
    assert outcomes["input"].output == "Error: g.jsonl:4: key 9 is not in the IFEval prompt file\n"
    assert outcomes["data"].exit_code == 3 and outcomes["other"].exit_code == 2
    assert isinstance(outcomes["bug"].exception, RuntimeError)  # a bug keeps its traceback


def test_capsule_score_keeps_the_scorers_data_in_the_capsule_cache(
    tmp_path: Path, prompts_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ifeval_scorer import nltk_data

    monkeypatch.setenv("CAPSULE_CACHE", str(tmp_path / "cache"))
    generations = _write(tmp_path / "g.jsonl", [json.dumps(row) for row in GOOD])
    try:
        result = CliRunner().invoke(cli, ["score", str(generations), "--prompts", str(prompts_path)])
        assert result.exit_code == 0, result.output
        assert nltk_data.data_dir() == tmp_path / "cache" / "nltk_data"
    finally:
        nltk_data.use_data_dir(None)
