"""One writer at a time: an OS lock (`fcntl.flock`) on a directory, held while a process writes in it.

A run directory is locked on itself, the ledger on the directory that holds it (`prereg/`). The
lock is the kernel's, on an open descriptor: it is released when the holder closes it or dies in
any way (SIGKILL included), so a dead process never blocks anyone, and no lock file is ever left in
or beside a run (whose every file is bundled). A refusal names the holder's pid, which the kernel
lists in /proc/locks (Linux; elsewhere the message says the pid is unknown).

Within one process the lock is re-entrant (a flock taken twice on two descriptors of one directory
would block its own holder): a nested `hold` of a directory this process already holds just counts.
A process forked without exec (vLLM's engine may be) inherits the descriptor, and with it the lock,
until it exits.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from capsule.errors import BusyError

PROC_LOCKS = Path("/proc/locks")
_HELD: dict[tuple[int, int], int] = {}  # (st_dev, st_ino) of a directory this process holds -> depth
_POLL_S = 0.05


def holder_pid(descriptor: int) -> int | None:
    """The pid of another process holding a flock on the file `descriptor` is open on, from
    /proc/locks (None where that file does not exist or lists no such lock)."""
    status = os.fstat(descriptor)
    device = f"{os.major(status.st_dev):02x}:{os.minor(status.st_dev):02x}:{status.st_ino}"
    try:
        lines = PROC_LOCKS.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()  # "12: FLOCK  ADVISORY  WRITE 4242 fe:00:2278754 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device and fields[4].isdigit():
            pid = int(fields[4])
            if pid != os.getpid():
                return pid
    return None


def _refusal(what: str, descriptor: int) -> BusyError:
    pid = holder_pid(descriptor)
    holder = f"pid {pid}" if pid is not None else "a process whose pid this system does not list"
    return BusyError(
        f"{what} is being written by another capsule process ({holder}); "
        "nothing was written: wait for it to finish, then run the command again"
    )


@contextmanager
def hold(directory: Path, what: str, wait_s: float = 0.0) -> Iterator[None]:
    """Hold the exclusive lock on `directory` (created if absent) for the `with` block.

    If another process holds it, retry for up to `wait_s` seconds, then raise BusyError (exit 2)
    naming `what` and the holder's pid, before the caller has written anything.
    """
    directory.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        status = os.fstat(descriptor)
        key = (status.st_dev, status.st_ino)
        if key in _HELD:
            _HELD[key] += 1
        else:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise _refusal(what, descriptor) from None
                    time.sleep(_POLL_S)
            _HELD[key] = 1
        try:
            yield
        finally:
            _HELD[key] -= 1
            if _HELD[key] == 0:
                del _HELD[key]
    finally:
        os.close(descriptor)  # the outermost close releases the lock; a nested one only drops its fd
