"""The launched server's watchdog: the leader of its process group, it dies with the capsule.

`python -m capsule.generation.backends.server_watchdog PARENT_PID -- COMMAND...` runs COMMAND (the
vLLM server) as its child in its own process group, which `server_launch.launch` starts as a new
session. Three ways it ends, each leaving nothing behind in the group:

- the server exits: the watchdog exits with its code (what the capsule's error messages report);
- the capsule stops it (SIGTERM or SIGINT to the whole group, `server_launch.stop_group`): the server
  got the signal too, the watchdog waits for it and then exits with its code;
- the capsule dies without a word (SIGKILL, OOM killer): the watchdog sees its parent change (it is
  re-parented), SIGTERMs the group, waits `GRACE_S`, then SIGKILLs the group, itself with it, so
  neither the server nor its engine core and workers (VLLM::EngineCore, VLLM::Worker) outlive it.

And where the watchdog itself is killed, Linux SIGTERMs the server (`PR_SET_PDEATHSIG`, set in the
child before it runs the command), which stops its engine as a stop by the capsule would.

Standard library only: it runs before anything else is imported in a fresh interpreter.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

POLL_S = 0.2  # how often the watchdog checks that the capsule is still its parent
GRACE_S = 10.0  # SIGTERM to SIGKILL, as server_launch.STOP_GRACE_S gives a server the capsule stops
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


def watchdog_command(parent_pid: int, command: list[str]) -> list[str]:
    """The command line that runs `command` under a watchdog of the capsule process `parent_pid`."""
    return [sys.executable, "-m", "capsule.generation.backends.server_watchdog", str(parent_pid), "--",
            *command]  # fmt: skip


def _stop_group(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM the group, give the child GRACE_S, then SIGKILL the group (this process included)."""
    group = os.getpgrp()
    try:
        os.killpg(group, signal.SIGTERM)
        child.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    os.killpg(group, signal.SIGKILL)


def _dies_with(watchdog_pid: int) -> Callable[[], None]:
    """What the child runs before the command (Linux only): SIGTERM it when the watchdog dies, and
    end it at once if the watchdog already has (it would be re-parented before prctl took hold)."""

    def arrange() -> None:
        if sys.platform != "linux":
            return
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != watchdog_pid:
            os._exit(1)

    return arrange


def watch(parent_pid: int, command: list[str]) -> int:
    """Run `command` and watch `parent_pid`; the child's exit code (see the module doc)."""
    stopping = False

    def on_stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True  # the whole group got it: wait for the child below

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    child = subprocess.Popen(command, preexec_fn=_dies_with(os.getpid()))  # safe: one thread here
    while True:
        code = child.poll()
        if code is not None:
            return code
        if not stopping and os.getppid() != parent_pid:
            _stop_group(child)
        time.sleep(POLL_S)


def main(argv: list[str]) -> int:
    """`PARENT_PID -- COMMAND...`; exit 2 on a malformed command line."""
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: server_watchdog PARENT_PID -- COMMAND...", file=sys.stderr)
        return 2
    return watch(int(argv[0]), argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
