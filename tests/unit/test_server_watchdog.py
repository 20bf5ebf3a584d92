"""The launched server's watchdog (`capsule.generation.backends.server_watchdog`) on its own, with a
sleeping child for the server: a watchdog killed outright does not leave its server running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capsule.generation.backends.server_watchdog import watchdog_command

CHILD = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead, whoever reaps it
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_a_sigkilled_watchdog_takes_its_server_with_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    watchdog = subprocess.Popen(
        watchdog_command(os.getpid(), [sys.executable, "-c", CHILD, str(pid_file)]), start_new_session=True
    )
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert watchdog.poll() is None and time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert _alive(child)
    watchdog.send_signal(signal.SIGKILL)
    watchdog.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _alive(child):
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            pytest.fail("the server outlived its SIGKILLed watchdog")
        time.sleep(0.05)
