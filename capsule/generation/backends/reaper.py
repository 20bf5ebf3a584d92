"""A reaper for the processes an in-process engine spawns: they die with the capsule.

The offline vLLM backend builds `vllm.LLM` in the capsule's own process, and vLLM starts its engine
core (and, on a GPU host, its workers) as child processes that outlive a capsule killed with SIGKILL
(VLLM::EngineCore, VLLM::Worker holding gigabytes). The capsule does not create those children, so it
cannot start them in a group of their own; instead `start_reaper()` starts this small process
(`python -m capsule.generation.backends.reaper CAPSULE_PID`), which keeps a list of the capsule's
descendants (pid and start time, refreshed every `POLL_S`) and, once the capsule is gone, SIGTERMs
the ones still running, waits `GRACE_S`, and SIGKILLs the rest. A pid reused by another process
(another start time) is never signalled. `stop_reaper` ends it when the engine was shut down.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

POLL_S = 0.5  # how often the list of descendants is refreshed and the capsule looked for
GRACE_S = 5.0  # SIGTERM to SIGKILL for an orphaned engine process


def start_reaper() -> subprocess.Popen[bytes]:
    """Start the reaper of this process's descendants (see the module doc)."""
    return subprocess.Popen(
        [sys.executable, "-m", "capsule.generation.backends.reaper", str(os.getpid())],
        stdin=subprocess.DEVNULL, start_new_session=True,  # not in our group: a Ctrl-C is ours alone
    )  # fmt: skip


def stop_reaper(reaper: subprocess.Popen[bytes]) -> None:
    """End the reaper (the engine was shut down by the capsule itself)."""
    if reaper.poll() is None:
        reaper.terminate()
        try:
            reaper.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            reaper.kill()


def _still_running(known: dict[int, float]) -> list[psutil.Process]:
    """The processes of `known` (pid -> start time) that are still those processes and alive."""
    alive = []
    for pid, created in known.items():
        try:
            process = psutil.Process(pid)
            if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            continue
    return alive


def _signal_all(processes: list[psutil.Process], sig: int) -> None:
    for process in processes:
        try:
            process.send_signal(sig)
        except psutil.NoSuchProcess:
            continue


def reap(capsule_pid: int) -> int:
    """Watch `capsule_pid` until it is gone, then stop its remembered descendants; exit code 0."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        capsule = psutil.Process(capsule_pid)
        started = capsule.create_time()
    except psutil.NoSuchProcess:
        return 0
    known: dict[int, float] = {}
    me = os.getpid()
    while True:
        try:
            if capsule.create_time() != started or capsule.status() == psutil.STATUS_ZOMBIE:
                break
            children = capsule.children(recursive=True)
        except psutil.NoSuchProcess:
            break
        for child in children:
            try:
                if child.pid != me:
                    known.setdefault(child.pid, child.create_time())
            except psutil.NoSuchProcess:
                continue  # it ended meanwhile
        time.sleep(POLL_S)
    leftovers = _still_running(known)
    _signal_all(leftovers, signal.SIGTERM)
    psutil.wait_procs(leftovers, timeout=GRACE_S)
    _signal_all(_still_running(known), signal.SIGKILL)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        print("usage: reaper CAPSULE_PID", file=sys.stderr)
        sys.exit(2)
    sys.exit(reap(int(sys.argv[1])))
