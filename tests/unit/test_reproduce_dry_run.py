"""`capsule reproduce --dry-run`: every arm and control of a plan walked with the fake backend;
interruption and resume; refusal of a modified plan and of a run directory from another plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from capsule.cli import cli
from capsule.pipeline import stage_generate as generate_module  # where reproduce looks generate_arm up


def _run(*args: str) -> object:
    return CliRunner().invoke(cli, ["reproduce", "--no-progress", *args])


def test_gpu_plan_walks_every_arm_and_control_without_a_gpu(repo_copy: Path) -> None:
    ledger_before = (repo_copy / "prereg" / "ledger.jsonl").read_bytes()
    result = _run("--plan", "prereg/agents-a1-4b-v3", "--dry-run")
    assert result.exit_code == 0, result.output + result.stderr
    assert "DRY RUN" in result.stderr
    last = result.stdout.splitlines()[-1]  # said plainly, after the verdicts
    assert last.startswith("DRY RUN: the verdicts above are of fake data") and "not in the ledger" in last
    assert "verify: capsule verify" not in result.stdout
    (run,) = (repo_copy / "runs" / "dry-run" / "agents-a1-4b").iterdir()
    results_md = (run / "RESULTS.md").read_text()
    first_block = results_md.split("\n\n")[1]  # the headline block opens with the warning
    assert first_block.startswith("<!-- capsule:numbers run=. block=headline -->\n**DRY RUN: FAKE DATA.**")
    assert "every verdict below is of fake data" in first_block
    assert "not recorded in the ledger" in first_block
    analysis = json.loads((run / "analysis.json").read_text())
    plan_text = (repo_copy / "prereg" / "agents-a1-4b-v3" / "plan.toml").read_text()
    assert len(analysis["arms"]) == plan_text.count("[[arms]]")
    assert len(analysis["controls"]) == plan_text.count("[[controls]]")
    assert not analysis["skipped_controls"]
    assert (repo_copy / "prereg" / "ledger.jsonl").read_bytes() == ledger_before  # never touched
    metas = [json.loads(p.read_text()) for p in (run / "generations").glob("*.meta.json")]
    assert metas and {m["backend"]["loader"] for m in metas} == {"image_text_to_text"}  # the plan's [model]
    assert {"vllm-server-authors", "vllm-server-authors-rerun"} <= {m["arm"]["name"] for m in metas}


def test_interrupted_reproduce_resumes_without_regenerating(
    repo_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = generate_module.generate_arm
    calls: list[str] = []

    def interrupted_after_three(arm, **kwargs):  # type: ignore[no-untyped-def]
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(arm.name)
        return real(arm, **kwargs)

    monkeypatch.setattr(generate_module, "generate_arm", interrupted_after_three)
    first = _run("--plan", "prereg/smoke-v2", "--dry-run")
    assert first.exit_code == 130 and "run the same command again" in first.stderr
    (run,) = (repo_copy / "runs" / "dry-run" / "smoke").iterdir()
    done = {p.name: p.stat().st_mtime_ns for p in (run / "generations").glob("*.jsonl")}
    assert len(done) == 3
    monkeypatch.setattr(generate_module, "generate_arm", real)
    second = _run("--plan", "prereg/smoke-v2", "--dry-run")
    assert second.exit_code == 0, second.output + second.stderr
    assert f"resuming run {run.name}" in second.stderr
    for name, mtime in done.items():
        assert (run / "generations" / name).stat().st_mtime_ns == mtime, f"{name} was regenerated"
    rows = [json.loads(line) for line in (run / "generations" / "hf-bf16-b4.jsonl").read_text().splitlines()]
    assert sorted(r["key"] for r in rows) == sorted({r["key"] for r in rows}) and len(rows) == 8
    assert (run / "bundle.dsse.json").exists()


def test_modified_plan_is_refused(repo_copy: Path) -> None:
    plan = repo_copy / "prereg" / "smoke-v2" / "plan.toml"
    plan.write_text(plan.read_text().replace("Tiny end-to-end", "Tiny end-to-End", 1))
    result = _run("--plan", "prereg/smoke-v2", "--dry-run")
    assert result.exit_code == 3
    assert "plan.toml" in result.stderr and not (repo_copy / "runs").exists()


def test_run_dir_of_another_plan_is_refused(repo_copy: Path) -> None:
    other = repo_copy / "elsewhere"
    other.mkdir()
    (other / "run.json").write_text(
        json.dumps(
            {
                "run_id": "x",
                "plan_path": "prereg/other/plan.toml",
                "plan_sha256": "0" * 64,
                "ledger_head_at_start": "0" * 64,
                "started": "2026-01-01T00:00:00Z",
                "capsule_version": "0.1.0",
            }
        )
    )
    result = _run("--plan", "prereg/smoke-v2", "--dry-run", "--run-dir", str(other))
    assert result.exit_code == 2
    assert "never mixed" in result.stderr
