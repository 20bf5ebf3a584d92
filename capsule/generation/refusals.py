"""A refused arm is a result, not a crash: telling an engine's refusal of a setting from a failure.

Each backend declares the start-up errors that mean "this engine does not support the arm's
settings" once, in `capsule.prereg.backend_specs` (`BackendSpec.refusals`: an exception class
name and a pattern). `refusal_of` matches an error raised while a backend loads against them,
narrowly: the class name must match and the pattern must be found in its message, anywhere in the
exception's chain (`__cause__`, `__context__`), or, for refusals marked `log`, in the start-up log
the engine's child process wrote (`attach_startup_log` gives it to the error). Anything else is a
failure: the run stops with one `Error:` line naming the arm, and everything written stays.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from capsule.errors import CapsuleError
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.backend_types import Refusal

_LOG_TAIL = 200_000  # characters of a start-up log searched (the end, where the error is)


class BackendRefusedError(CapsuleError):
    """A backend refused an arm's settings at load time; `message` is the engine's own words.

    `refused` is the declared refusal it matched and `log` the evidence kept beside the record (the
    engine's start-up log, or the formatted exception chain): `load_backend` sets both. One raised
    without them (a backend's own check that no declaration covers) is a failure, not a result."""

    exit_code = 2

    def __init__(
        self, arm: str, backend: str, message: str, why: str = "", *,
        refused: Refused | None = None, log: str = "",
    ) -> None:
        super().__init__(f"arm {arm!r}: backend {backend!r} refused its settings: {message}")
        self.arm, self.backend, self.message, self.why = arm, backend, message, why
        self.refused, self.log = refused, log


@dataclass(frozen=True)
class Refused:
    """What matched: the declared refusal and the engine's message (the matching line)."""

    refusal: Refusal
    message: str


_STARTUP_LOG = "startup_log"  # the attribute an error carries its engine's start-up log in


def attach_startup_log(error: BaseException, text: str) -> None:
    """Give `error` (vLLM's, or ours) the start-up log its engine wrote, where `refusal_of` looks
    for a declared refusal (an attribute, since the exception classes are not all ours)."""
    setattr(error, _STARTUP_LOG, text)


def startup_log_of(error: BaseException) -> str:
    """The start-up log attached to `error`, or "" when none was."""
    log = getattr(error, _STARTUP_LOG, "")
    return log if isinstance(log, str) else ""


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _line_with(text: str, match: re.Match[str]) -> str:
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : end if end >= 0 else len(text)].strip()


def _in_log(refusal: Refusal, log: str) -> str | None:
    """The log line `<Exception>: <message matching the pattern>`, without the logger's prefix."""
    found = None
    line = rf"\b{re.escape(refusal.exception)}: ((?:{refusal.pattern})[^\n]*)"
    for match in re.finditer(line, log[-_LOG_TAIL:]):
        found = match.group(1).strip()
    return found


def refusal_of(backend: str, error: BaseException, arm: Mapping[str, Any] | None = None) -> Refused | None:
    """The declared refusal of `backend` that `error` is (None: it is a failure, not a refusal).
    With `arm` (its plain data), only a refusal that applies to the arm's settings counts
    (`Refusal.applies_to`): an engine refusing a setting the arm did not ask for has failed."""
    spec = SPECS.get(backend)
    if spec is None:
        return None
    chain = _chain(error)
    for refusal in spec.refusals:
        if arm is not None and not refusal.applies_to(arm):
            continue
        for exc in chain:
            if type(exc).__name__ == refusal.exception:
                text = exc.message if isinstance(exc, BackendRefusedError) else str(exc)
                match = re.search(refusal.pattern, text)
                if match:
                    return Refused(refusal, _line_with(text, match))
        if refusal.log:
            for exc in chain:
                log = startup_log_of(exc)
                message = _in_log(refusal, log) if log else None
                if message:
                    return Refused(refusal, message)
    return None


def refusal_evidence(error: BaseException) -> str:
    """What is kept beside a refusal record as its evidence: the engine's start-up log where one
    is attached to the error's chain (a child process refused), else the formatted exception chain."""
    logs = [log for exc in _chain(error) if (log := startup_log_of(exc))]
    if logs:
        return logs[0][-_LOG_TAIL:]
    return "".join(traceback.format_exception(error))
