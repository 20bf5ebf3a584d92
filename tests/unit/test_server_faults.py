"""Issue 26, finding 7: a misbehaving endpoint (the fake OpenAI server) and a killed capsule.

`request_timeout_s` bounds a whole request, so an SSE keep-alive trickle ends in time; every field of
an event is type-checked (a garbled one is a retryable failure, and after `max_attempts` one error,
never a traceback); a reply longer than max_tokens is refused; and a SIGKILLed capsule leaves no
launched server, nor the server's own children (vLLM's engine core and workers), behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from openai_fake import Faults, fake_openai
from test_server_backend import KEYS, model_dir, no_retry_pause, rows, run, server_arm  # noqa: F401

from capsule.errors import CapsuleError

ROOT = Path(__file__).resolve().parents[2]


def test_a_keepalive_trickle_ends_within_the_request_timeout(tmp_path: Path, model_dir: Path) -> None:  # noqa: F811
    with fake_openai(Faults(keepalive_forever=True)) as fake:
        started = time.monotonic()
        with pytest.raises(CapsuleError, match=r"no complete reply within request_timeout_s = 1 s") as caught:
            run(server_arm(request_timeout_s=1.0, max_attempts=2), tmp_path, model_dir, fake.url, KEYS[:1])
        took = time.monotonic() - started
    assert took < 6.0, took  # 2 attempts of 1 s each, not a read timeout renewed by every keep-alive
    assert caught.value.exit_code == 2 and "failed 2 times" in str(caught.value)


GARBLED = [
    ('{"model": "fake-model", "choices": "abc"}', "choices 'abc' is not a list of objects"),
    ('{"model": "fake-model", "choices": [{"index": 0, "token_ids": ["x1"]}]}', "token_ids"),
    ('{"model": "fake-model", "choices": [], "usage": [1, 2, 3]}', "usage"),
    ('{"model": "fake-model", "choices": [{"index": 0, "token_ids": [1], "finish_reason": 7}]}',
     "finish_reason '7'"),
    ('{"model": 5, "choices": []}', "model '5' is not a string"),
]


@pytest.mark.parametrize(("event", "words"), GARBLED)
def test_a_garbled_event_is_retried_then_one_error(
    tmp_path: Path, model_dir: Path, event: str, words: str  # noqa: F811
) -> None:
    with fake_openai(Faults(raw_event=event, raw_event_next=1)) as fake:  # once: the retry succeeds
        result = run(server_arm(), tmp_path / "once", model_dir, fake.url)
    assert result.complete and len(rows(result)) == len(KEYS)
    with fake_openai(Faults(raw_event=event)) as fake:  # always: one error naming the field
        with pytest.raises(CapsuleError) as caught:
            run(server_arm(max_attempts=2), tmp_path / "always", model_dir, fake.url, KEYS[:1])
    message = str(caught.value)
    assert "malformed event" in message and words in message and "failed 2 times" in message, message


def test_more_tokens_than_max_tokens_are_refused(tmp_path: Path, model_dir: Path) -> None:  # noqa: F811
    with fake_openai(Faults(ignore_max_tokens=True, tokens=600)) as fake:
        with pytest.raises(CapsuleError, match="600 tokens against max_tokens 8") as caught:
            run(replace(server_arm(), max_new_tokens=8), tmp_path, model_dir, fake.url, KEYS[:1])
    assert len(fake.bodies) == 1  # refused at once: a server that ignores max_tokens is not retried
    assert caught.value.exit_code == 2


# ---- the watchdog: a capsule killed with SIGKILL leaves nothing behind -------------------------------

ENGINE = """
import subprocess, sys, time
from pathlib import Path
engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # like VLLM::EngineCore
Path(sys.argv[1]).write_text(str(engine.pid))
time.sleep(600)
"""

CAPSULE = """
import sys, time
sys.path[:0] = [{root!r}]
from pathlib import Path
from capsule.generation.backends.server_launch import launch
from capsule.run_dir import RunDir
out = Path(sys.argv[1])
command = [sys.executable, "-c", {engine!r}, str(out / "engine.pid")]
server = launch(RunDir(out), "srv", lambda port: command, {{}})
print(server.process.pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_sigkill_of_the_capsule_stops_the_server_and_its_children(tmp_path: Path) -> None:
    script = tmp_path / "capsule.py"
    script.write_text(CAPSULE.format(root=str(ROOT), engine=ENGINE))
    capsule = subprocess.Popen([sys.executable, str(script), str(tmp_path / "run")], stdout=subprocess.PIPE,
                               text=True)  # fmt: skip
    try:
        assert capsule.stdout is not None
        leader = int(capsule.stdout.readline())
        engine_pid_file = tmp_path / "run" / "engine.pid"
        deadline = time.monotonic() + 30
        while not engine_pid_file.is_file() or not engine_pid_file.read_text():
            assert time.monotonic() < deadline, "the fake server never started its engine"
            time.sleep(0.05)
        engine = int(engine_pid_file.read_text())
        server = [p.pid for p in psutil.Process(leader).children()]
        assert os.getpgid(engine) == leader and server  # one group: watchdog, server, engine
        capsule.send_signal(signal.SIGKILL)
        capsule.wait(timeout=10)
        deadline = time.monotonic() + 20
        while not all(_gone(pid) for pid in (leader, engine, *server)):
            assert time.monotonic() < deadline, "the server or its engine outlived the killed capsule"
            time.sleep(0.1)
    finally:
        if capsule.poll() is None:
            capsule.kill()
        for pid in psutil.pids():  # never leave a test's own processes behind
            try:
                if os.getpgid(pid) == leader:
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, UnboundLocalError):
                pass


OFFLINE = """
import subprocess, sys, time
sys.path[:0] = [{root!r}]
from capsule.generation.backends.reaper import start_reaper
reaper = start_reaper()
engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # as vLLM's engine core
print(reaper.pid, engine.pid, flush=True)
time.sleep(600)
"""


def test_sigkill_of_the_capsule_stops_the_engine_an_in_process_backend_spawned(tmp_path: Path) -> None:
    """The offline vLLM backend's case: the engine is the capsule's own child, in its group; the
    reaper the backend starts stops it once the capsule is gone (and then exits itself)."""
    script = tmp_path / "offline.py"
    script.write_text(OFFLINE.format(root=str(ROOT)))
    capsule = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    reaper = engine = 0
    try:
        assert capsule.stdout is not None
        reaper, engine = (int(pid) for pid in capsule.stdout.readline().split())
        time.sleep(1.5)  # the reaper has listed the engine (it looks every 0.5 s)
        capsule.send_signal(signal.SIGKILL)
        capsule.wait(timeout=10)
        deadline = time.monotonic() + 20
        while not (_gone(engine) and _gone(reaper)):
            assert time.monotonic() < deadline, "the engine outlived the killed capsule"
            time.sleep(0.1)
    finally:
        if capsule.poll() is None:
            capsule.kill()
        for pid in (engine, reaper):
            if pid and not _gone(pid):
                os.kill(pid, signal.SIGKILL)
