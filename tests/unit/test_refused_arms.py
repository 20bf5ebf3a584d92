"""A refused arm is a result, not a crash (issue 27 item 2), with the fake backend's `refuse` and
`crash` options: the refusal is recorded in the run with the engine's message, the run goes on and
is signed, every control, comparison and verdict that needs the arm says "not run: refused (...)",
a resumed run does not retry it unless `--retry-refused`; a failure that is not a declared refusal
stops the run with one `Error:` line naming the arm (exit 2) and keeps what was generated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fake_plan import PLAN_DIR, PLAN_NAME, fake_arm, fake_verdict, write_and_seal_fake_plan

from capsule.cli import cli
from capsule.errors import CapsuleError
from capsule.generation.backends.startup_log import StderrTee
from capsule.generation.refusals import BackendRefusedError, attach_startup_log, refusal_of
from capsule.run_dir import RunDir


def _body(verdict_arm: str, refused_options: str, last_options: str = "") -> str:
    return (
        fake_arm("fake-a", "")
        + fake_arm("fake-no", refused_options, batch=2)
        + fake_arm("fake-b", "", batch=2)
        + (fake_arm("fake-c", last_options, batch=8) if last_options else "")
        + """
[[controls]]
name = "scorer-refused"
kind = "scorer_stability"
arms = ["fake-no"]
k = 2

[[controls]]
name = "batch-ok"
kind = "batch_size"
arms = ["fake-a", "fake-b"]

[[comparisons]]
name = "a-vs-no"
arms = ["fake-a", "fake-no"]
metric = "prompt_level_strict_acc"
confidence = 0.95

[[comparisons]]
name = "a-vs-b"
arms = ["fake-a", "fake-b"]
metric = "prompt_level_strict_acc"
confidence = 0.95
"""
        + fake_verdict(verdict_arm)
    )


def _reproduce(*extra: str) -> Result:
    return CliRunner().invoke(cli, ["reproduce", "--no-progress", "--plan", str(PLAN_DIR), *extra])


def _run_dir(root: Path) -> Path:
    (run,) = (root / "results" / PLAN_NAME).iterdir()
    return run


def test_refused_arm_is_recorded_reported_and_signed(repo_copy: Path) -> None:
    assert CliRunner().invoke(cli, ["keygen"]).exit_code == 0
    write_and_seal_fake_plan(repo_copy, _body("fake-a", 'refuse = "no kernel for this"'))
    made = _reproduce()
    assert made.exit_code == 0, made.output + made.stderr
    assert "arm fake-no: REFUSED by backend fake: fake engine refuses: no kernel for this" in made.stderr
    run = RunDir(_run_dir(repo_copy))
    record = json.loads(run.refusal("fake-no").read_text(encoding="utf-8"))
    assert record["status"] == "refused" and record["message"] == "fake engine refuses: no kernel for this"
    assert not run.generations("fake-no").exists()
    assert run.generations("fake-b").exists()  # the run went on past the refused arm
    analysis = json.loads(run.analysis.read_text(encoding="utf-8"))
    expected = "not run: refused (fake-no: fake engine refuses: no kernel for this)"
    assert analysis["refused_arms"] == {"fake-no": "fake engine refuses: no kernel for this"}
    assert analysis["arms"]["fake-no"]["refused"] == "fake engine refuses: no kernel for this"
    assert analysis["controls"]["scorer-refused"]["skipped"] == expected
    assert "skipped" not in analysis["controls"]["batch-ok"]
    assert analysis["comparisons"]["a-vs-no"]["verdict"] == "NOT RUN"
    assert analysis["comparisons"]["a-vs-no"]["not_run"] == expected
    assert "not_run" not in analysis["comparisons"]["a-vs-b"]
    results = run.results.read_text(encoding="utf-8")
    assert f"**scorer-refused** (scorer stability): {expected}." in results
    assert f"a-vs-no: {expected}." in results
    assert "- `fake-no`: fake engine refuses: no kernel for this" in results
    assert CliRunner().invoke(cli, ["verify", str(run.path)]).exit_code == 0


def test_refused_verdict_arm_reads_not_run(repo_copy: Path) -> None:
    assert CliRunner().invoke(cli, ["keygen"]).exit_code == 0
    write_and_seal_fake_plan(repo_copy, _body("fake-no", 'refuse = "dtype unsupported"'))
    made = _reproduce()
    assert made.exit_code == 0, made.output + made.stderr
    assert "card_avg_strict on fake-no: NOT RUN: not run: refused (fake-no: " in made.stdout
    analysis = json.loads(RunDir(_run_dir(repo_copy)).analysis.read_text(encoding="utf-8"))
    reading = analysis["headline"]["readings"][0]
    assert reading["verdict"] == "NOT RUN"
    assert reading["not_run"] == "not run: refused (fake-no: fake engine refuses: dtype unsupported)"


def test_resume_keeps_a_refusal_unless_asked(repo_copy: Path) -> None:
    assert CliRunner().invoke(cli, ["keygen"]).exit_code == 0
    write_and_seal_fake_plan(repo_copy, _body("fake-a", 'refuse = "no"', 'crash = "later arm"'))
    first = _reproduce()
    assert first.exit_code == 2 and "arm fake-no: REFUSED" in first.stderr
    run = RunDir(_run_dir(repo_copy))
    before = run.refusal("fake-no").read_bytes()
    resumed = _reproduce()  # the unfinished run is resumed: the refusal stands, nothing is retried
    assert "arm fake-no: refused before (fake engine refuses: no); not retried" in resumed.stderr
    assert "REFUSED" not in resumed.stderr and run.refusal("fake-no").read_bytes() == before
    retried = _reproduce("--retry-refused")
    assert "arm fake-no: REFUSED by backend fake" in retried.stderr
    assert _run_dir(repo_copy) == run.path


def test_a_crash_is_not_a_refusal(repo_copy: Path) -> None:
    assert CliRunner().invoke(cli, ["keygen"]).exit_code == 0
    write_and_seal_fake_plan(repo_copy, _body("fake-a", 'crash = "segfault in kernel"'))
    made = _reproduce()
    assert made.exit_code == 2
    lines = [line for line in made.stderr.splitlines() if line.startswith("Error:")]
    assert lines == [
        "Error: arm 'fake-no' failed: RuntimeError: fake engine crashed: segfault in kernel; everything "
        "generated so far is kept: run the same command again to resume"
    ]
    run = RunDir(_run_dir(repo_copy))
    assert run.generations("fake-a").exists() and not run.refusal("fake-no").exists()
    assert not run.is_bundled


def test_refusal_patterns_are_narrow() -> None:
    gdn = RuntimeError("VLLM batch_invariant mode is not supported for GDN_ATTN.")
    found = refusal_of("vllm", gdn)
    assert found is not None and found.message == "VLLM batch_invariant mode is not supported for GDN_ATTN."
    assert refusal_of("vllm", ValueError("VLLM batch_invariant mode is not supported for GDN_ATTN.")) is None
    assert refusal_of("vllm", RuntimeError("CUDA error: an illegal memory access")) is None
    assert refusal_of("hf", gdn) is None  # declared per backend
    # the engine process's error reaches the caller only in its start-up log
    startup = RuntimeError("Engine core initialization failed. See root cause above.")
    attach_startup_log(startup, (
        "(EngineCore pid=1) ERROR [core.py:1512] EngineCore failed to start.\n"
        "(EngineCore pid=1) ERROR [core.py:1512] RuntimeError: VLLM batch_invariant mode is not "
        "supported for GDN_ATTN.\n"
    ))
    found = refusal_of("vllm", startup)
    assert found is not None and found.message == "VLLM batch_invariant mode is not supported for GDN_ATTN."
    crashed = RuntimeError("Engine core initialization failed. See root cause above.")
    attach_startup_log(crashed, "ValueError: Available memory on node 0 is less than desired")
    assert refusal_of("vllm", crashed) is None
    own = BackendRefusedError("a", "vllm", "vLLM-CPU cannot run VLLM_BATCH_INVARIANT=1: Triton")
    assert refusal_of("vllm", own) is not None


def test_an_engine_process_refusal_is_read_from_its_start_up_log() -> None:
    """A child started while the engine starts writes the refusal to its stderr (as vLLM's engine
    process does); the caller's error carries that log, and the refusal is found in it."""
    child = (
        "import sys; sys.stderr.write('(EngineCore pid=7) ERROR [core.py:1] RuntimeError: VLLM "
        "batch_invariant mode is not supported for GDN_ATTN.\\n')"
    )
    with pytest.raises(RuntimeError) as caught, StderrTee():
        subprocess.run([sys.executable, "-c", child], check=True)
        raise RuntimeError("Engine core initialization failed. See root cause above.")
    found = refusal_of("vllm", caught.value)
    assert found is not None and found.message == "VLLM batch_invariant mode is not supported for GDN_ATTN."


def test_a_launched_server_that_refuses_at_start_up_is_read_from_its_log(tmp_path: Path) -> None:
    """The server backend's launched `vllm serve` writes the engine's refusal to its log and exits:
    the error carries the log, and the server backend's declared refusals match it."""
    import httpx

    from capsule.generation.backends.server_launch import launch, wait_healthy

    script = (
        "import sys; print('(EngineCore pid=9) ERROR RuntimeError: VLLM batch_invariant mode is not "
        "supported for GDN_ATTN.'); sys.exit(1)"
    )
    server = launch(RunDir(tmp_path), "bi", lambda port: [sys.executable, "-c", script], {})
    with httpx.Client() as client, pytest.raises(CapsuleError) as caught:
        wait_healthy(server, client, timeout_s=30)
    found = refusal_of("server", caught.value)
    assert found is not None and found.message == "VLLM batch_invariant mode is not supported for GDN_ATTN."
    assert refusal_of("server", RuntimeError("the launched server exited with code 1")) is None
