"""`capsule generate` through click: ad-hoc arms meet the plan loader's rules and both forms write
run directories that resume, that `reproduce` continues (sealed) or refuses (ad hoc)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from capsule.cli import cli
from capsule.machine.manifest import SCHEMA_VERSION

DRY = ["--dry-run", "--no-progress", "--max-new-tokens", "4"]


def _generate(*args: str) -> Result:
    return CliRunner().invoke(cli, ["generate", *args])


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_adhoc_dry_run_writes_an_unsealed_run_directory_that_resumes(tmp_path: Path) -> None:
    done = _generate("--keys", "1000,1001", "--out", str(tmp_path), *DRY)
    assert done.exit_code == 0, done.output
    assert "2/2 rows, 2 new" in done.output
    run = tmp_path / "dry-run"
    record = _json(run / "run.json")
    assert record["plan_path"] == "adhoc" and record["ledger_head_at_start"] == "none"
    assert record["plan_sha256"] == hashlib.sha256((run / "adhoc.json").read_bytes()).hexdigest()
    adhoc = _json(run / "adhoc.json")
    assert adhoc["prompts"]["keys"] == [1000, 1001]
    assert adhoc["arm"]["backend"] == "fake" and adhoc["arm"]["subset"] == "adhoc"
    assert adhoc["arm"]["decoding"] == {
        "mode": "greedy",
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "min_p": 0.0,
        "presence_penalty": 0.0,
        "repetition_penalty": 1.0,
    }
    assert _json(run / "manifest.json")["schema_version"] == SCHEMA_VERSION
    meta = _json(run / "generations" / "adhoc.meta.json")
    assert meta["plan_hash"] == record["plan_sha256"] and meta["arm"]["decoding"]["temperature"] == 0.0
    rows_before = (run / "generations" / "adhoc.jsonl").read_bytes()
    again = _generate("--keys", "1000,1001", "--out", str(tmp_path), *DRY)
    assert again.exit_code == 0, again.output
    assert "2/2 rows, 0 new" in again.output and f"resuming run {record['run_id']}" in again.stderr
    assert (run / "generations" / "adhoc.jsonl").read_bytes() == rows_before


def test_adhoc_runs_land_under_runs_and_other_options_get_another_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _generate("--first", "2", *DRY).exit_code == 0
    assert _generate("--first", "2", *DRY).exit_code == 0  # the same options: the same run, resumed
    assert _generate("--first", "3", *DRY).exit_code == 0  # other keys: another ad-hoc "plan"
    runs = sorted((tmp_path / "runs" / "dry-run" / "adhoc").iterdir())
    assert len(runs) == 2
    assert len({_json(r / "run.json")["plan_sha256"] for r in runs}) == 2


def test_adhoc_options_are_checked_by_the_plan_loader_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "u"
    unknown = _generate("--backend", "tgi", "--out", str(out), "--first", "2")
    assert unknown.exit_code == 2
    assert "'backend' is 'tgi'; expected one of: hf, vllm, server, fake" in unknown.output
    bad_name = _generate("--name", "../x", "--out", str(out), *DRY)
    assert bad_name.exit_code == 2 and "'../x' must match" in bad_name.output
    zero = _generate("--batch-size", "0", "--out", str(out), *DRY)
    assert zero.exit_code == 2 and "'batch_size' is 0; it must be at least 1" in zero.output
    missing_key = _generate("--keys", "1000,7", "--out", str(out), *DRY)
    assert missing_key.exit_code == 2 and "not in the prompt set: [7]" in missing_key.output
    assert not out.exists()


def test_an_adhoc_run_directory_is_refused_by_another_arm_reproduce_and_verify(
    repo_copy: Path,
) -> None:
    out = repo_copy / "mine"
    assert _generate("--first", "2", "--out", str(out), *DRY).exit_code == 0
    other = _generate("--first", "2", "--name", "other", "--out", str(out), *DRY)
    assert other.exit_code == 2 and "results of different plans are never mixed" in other.output
    run = str(out / "dry-run")
    reproduce = CliRunner().invoke(
        cli, ["reproduce", "--plan", "prereg/smoke-v2", "--dry-run", "--run-dir", run]
    )
    assert reproduce.exit_code == 2 and "never mixed" in reproduce.output
    verify = CliRunner().invoke(cli, ["verify", run])
    assert verify.exit_code == 3 and "bundle.json is missing" in verify.output


def test_a_sealed_arm_lands_in_the_run_reproduce_continues(repo_copy: Path) -> None:
    done = _generate("--plan", "prereg/smoke-v2", "--arm", "hf-bf16-b1", "--dry-run", "--no-progress")
    assert done.exit_code == 0, done.output
    (run,) = (repo_copy / "runs" / "dry-run" / "smoke").iterdir()
    record = _json(run / "run.json")
    assert record["plan_path"] == "prereg/smoke-v2/plan.toml" and record["ledger_head_at_start"] != "none"
    plan_bytes = (repo_copy / "prereg" / "smoke-v2" / "plan.toml").read_bytes()
    assert record["plan_sha256"] == hashlib.sha256(plan_bytes).hexdigest()
    arm_rows = run / "generations" / "hf-bf16-b1.jsonl"
    mtime = arm_rows.stat().st_mtime_ns
    reproduce = CliRunner().invoke(
        cli, ["reproduce", "--no-progress", "--plan", "prereg/smoke-v2", "--dry-run"]
    )
    assert reproduce.exit_code == 0, reproduce.output
    assert f"resuming run {run.name}" in reproduce.stderr
    assert arm_rows.stat().st_mtime_ns == mtime  # generate's arm is not made again


def test_plan_needs_an_arm() -> None:
    result = _generate("--plan", "prereg/smoke-v2")
    assert result.exit_code == 2 and "--plan needs --arm NAME" in result.output


def test_help_and_refusal_agree_on_what_out_names(repo_copy: Path) -> None:
    """--help says --out is the run directory itself; the folder the default runs live in is then
    refused with the same words, naming --out (not reproduce's --run-dir)."""
    help_text = " ".join(_generate("--help").output.split())
    assert "The run directory itself" in help_text and "runs/adhoc/ (ad hoc)" in help_text
    assert _generate(*DRY).exit_code == 0  # the default: a new run under runs/dry-run/adhoc/
    parent = repo_copy / "runs" / "dry-run"
    before = sorted(p.relative_to(parent) for p in parent.rglob("*"))
    refused = _generate("--no-progress", "--max-new-tokens", "4", "--dry-run", "--out", "runs")
    assert refused.exit_code == 2
    assert "--out names the run directory itself" in refused.stderr and "--run-dir" not in refused.stderr
    assert sorted(p.relative_to(parent) for p in parent.rglob("*")) == before
