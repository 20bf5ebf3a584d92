"""Keep what an engine's child processes write to stderr while it starts, to find why it refused.

vLLM builds its model in an engine process; when that process raises (for example vLLM 0.33's
`RuntimeError: VLLM batch_invariant mode is not supported for GDN_ATTN.`), the caller only sees
"Engine core initialization failed. See root cause above." The root cause is in the child's
stderr. `StderrTee` puts a pipe on file descriptor 2 while the engine starts, so every process
started meanwhile inherits it; a daemon thread copies everything to the real stderr (nothing is
hidden) and keeps the last `KEEP` bytes, which `capsule.generation.refusals` searches. The
parent's own descriptor 2 is restored when the block ends; children keep writing through the
thread for as long as they live.
"""

from __future__ import annotations

import os
import threading
import time
from types import TracebackType

from capsule.generation.refusals import attach_startup_log

KEEP = 256 * 1024  # bytes of start-up output kept (the error is at the end)
_QUIET_S, _WAIT_S = 0.3, 5.0  # after a failure: wait until the pipe is quiet this long, at most this


class StderrTee:
    """`with StderrTee() as tee:` ... `tee.text()`: stderr written meanwhile (this and child processes)."""

    def __init__(self) -> None:
        self._kept = bytearray()
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._saved = -1

    def __enter__(self) -> StderrTee:
        try:
            read_end, write_end = os.pipe()
            self._saved = os.dup(2)
        except OSError:  # no descriptor to spare: start without the tee
            return self
        self._real = os.dup(self._saved)
        threading.Thread(target=self._pump, args=(read_end,), daemon=True).start()
        os.dup2(write_end, 2)
        os.close(write_end)
        return self

    def _pump(self, read_end: int) -> None:
        while True:
            try:
                chunk = os.read(read_end, 65536)
            except OSError:
                return
            if not chunk:
                os.close(read_end)
                return
            try:
                os.write(self._real, chunk)
            except OSError:
                pass
            with self._lock:
                self._kept += chunk
                del self._kept[:-KEEP]
                self._last = time.monotonic()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._saved < 0:
            return
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._saved = -1
        if error is not None:  # let a dying child's last lines arrive before they are searched
            deadline = time.monotonic() + _WAIT_S
            while time.monotonic() < deadline and time.monotonic() - self._last < _QUIET_S:
                time.sleep(0.05)
            attach_startup_log(error, self.text())

    def text(self) -> str:
        """What was kept, decoded (undecodable bytes replaced)."""
        with self._lock:
            return bytes(self._kept).decode("utf-8", "replace")
