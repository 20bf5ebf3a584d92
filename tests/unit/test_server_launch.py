"""A launched server's life cycle, with the fake endpoint as the launched process instead of vLLM:
its pid record, SIGTERM of the capsule stops it, SIGKILL of the capsule is followed by its watchdog
stopping it, and the next run in the same directory resumes (the real vLLM server:
tests/integration/test_server.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from capsule.generation.backends.server_launch import read_record, running
from capsule.run_dir import RunDir

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
N_KEYS = 8

DRIVER = """
import json, sys
from pathlib import Path
sys.path[:0] = [{root!r}, {here!r}]
from arm_builder import build_arm
from capsule.generation.arm_runner import generate_arm
from capsule.generation.backends import server
from capsule.generation.backends.fake import FakeChatTokenizer
from ifeval_scorer import Prompt

def fake_command(model_dir, dtype, max_num_seqs, port, engine):
    code = ("import sys; sys.path[:0] = [{root!r}, {here!r}]; from openai_fake import Faults, serve_forever; "
            f"serve_forever({{port}}, Faults(delay_s=0.04, tokens=8))")
    return [sys.executable, "-c", code]

server.launch_command = fake_command
out, model = Path(sys.argv[1]), Path(sys.argv[2])
prompts = {{k: Prompt(k, f"prompt {{k}}", ("x",), ({{}},)) for k in range(100, 100 + {n})}}
arm = build_arm(name="srv", backend="server", batch_size=1, max_new_tokens=20,
                backend_options={{"concurrency": 1, "enforce_eager": True, "model_id": "fake-model"}})
result = generate_arm(arm, prompts=prompts, keys=list(prompts), model_dir=model, out_dir=out,
                      plan_hash="p" * 64, manifest_digest="m" * 64, progress=False,
                      tokenizer=FakeChatTokenizer())
print("rows", result.n_rows)
"""


@pytest.fixture()
def driver(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "generation_config.json").write_text(json.dumps({"eos_token_id": 0}))
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(root=str(ROOT), here=str(HERE), n=N_KEYS))
    return script


def _start(driver: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(driver), str(out), str(driver.parent / "model")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _rows(out: Path) -> list[dict[str, Any]]:
    path = out / "generations" / "srv.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait_rows(out: Path, process: subprocess.Popen[str], n: int) -> None:
    deadline = time.monotonic() + 60
    while len(_rows(out)) < n:
        assert process.poll() is None, process.stdout.read()  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "no rows within 60 s"
        time.sleep(0.05)


def _record(out: Path, launch: int) -> dict[str, Any] | None:
    return read_record(RunDir(out).server_pid(f"srv.{launch}"))


def _alive(record: dict[str, Any]) -> bool:
    return running(record["pid"], record["create_time"])


def test_sigterm_stops_the_server_and_after_sigkill_its_watchdog_does(
    driver: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    first = _start(driver, out)
    _wait_rows(out, first, 1)
    record = _record(out, 1)
    assert record is not None and record["pgid"] == record["pid"] and _alive(record)
    first.send_signal(signal.SIGTERM)
    first.wait(timeout=60)
    assert not _alive(record) and _record(out, 1) is None  # stopped, record removed
    command = json.loads((out / "servers" / "srv.1.command.json").read_text())
    assert command["status"] == "stopped" and command["returncode"] is not None
    kept = _rows(out)

    second = _start(driver, out)
    _wait_rows(out, second, len(kept) + 1)
    orphan = _record(out, 2)
    assert orphan is not None
    second.send_signal(signal.SIGKILL)
    second.wait(timeout=60)
    deadline = time.monotonic() + 20
    while _alive(orphan):  # the killed capsule could not stop it: its watchdog does
        assert time.monotonic() < deadline, "the server outlived the SIGKILLed capsule"
        time.sleep(0.1)
    kept = _rows(out)

    third = _start(driver, out)
    output, _ = third.communicate(timeout=120)
    assert third.returncode == 0, output
    assert not list((out / "servers").glob("*.pid.json"))  # the dead launch's record removed
    rows = _rows(out)
    assert rows[: len(kept)] == kept and sorted(r["key"] for r in rows) == list(range(100, 100 + N_KEYS))
    for launch in (1, 3):  # stopped by their own capsule: the key is redacted from what they printed
        assert (out / "servers" / f"srv.{launch}.log").read_text().startswith("api key: <api-key>")
