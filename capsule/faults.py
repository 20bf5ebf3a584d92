"""Fault injection for crash tests: kill this process at a named point of generation or signing.

`CAPSULE_KILL_AT=<point>` (read here and nowhere else) makes `crash_point(<point>)` send this process
SIGKILL, the one signal nothing can clean up after, so a test can check that the step after it is
restartable. Unset (always, outside tests), `crash_point` does nothing. The points, in order:

    before-report        analysis.json written, RESULTS.md and plots not yet
    before-bundle        the report written, bundle.json not yet
    before-public-key    bundle.json written
    before-envelope      bundle.pub.pem written, bundle.dsse.json not yet
    before-ledger        the envelope written, the ledger's `bundle` entry not yet appended
    after-ledger         the entry appended (the run is finished)

`capsule report --resign` passes through two more before the bundle points above:

    resign-journaled     the undo journal written, nothing in the run changed yet
    resign-documents     RESULTS.md and plots rewritten, bundle.json not yet

Generation has one, which `CAPSULE_KILL_AT=<point>:<arm>` narrows to one arm (so a test can kill
one lane of `reproduce --lanes` mid-arm and leave the others running):

    after-batch          a batch's rows durably appended to the arm's file (generation.store)
"""

from __future__ import annotations

import os
import signal

KILL_AT_ENV = "CAPSULE_KILL_AT"
SIGNING_POINTS: tuple[str, ...] = (
    "before-report",
    "before-bundle",
    "before-public-key",
    "before-envelope",
    "before-ledger",
    "after-ledger",
)
RESIGN_POINTS: tuple[str, ...] = ("resign-journaled", "resign-documents")
GENERATION_POINTS: tuple[str, ...] = ("after-batch",)


def crash_point(point: str, subject: str | None = None) -> None:
    """SIGKILL this process here if `$CAPSULE_KILL_AT` names `point`, or `point:subject` (a test's
    injected crash; `subject`: the arm at a generation point)."""
    if point not in SIGNING_POINTS + RESIGN_POINTS + GENERATION_POINTS:
        raise ValueError(f"unknown crash point {point!r}")  # a typo in the code, never user input
    wanted = os.environ.get(KILL_AT_ENV)
    if wanted == point or (subject is not None and wanted == f"{point}:{subject}"):
        os.kill(os.getpid(), signal.SIGKILL)
