"""The capsule's errors: each carries a user-facing message and the exit code the CLI uses.

Library code raises these and never prints; `capsule.cli` turns them into one `Error: ...` line.
Exit codes: 2 bad input or an unavailable resource, 3 a failed verification (hash, signature, chain).
"""

from __future__ import annotations

import re

# C0 controls but tab, DEL, C1 controls, and the line / paragraph separators: bytes that move the
# cursor, recolour or rewrite what a terminal shows (CR, ESC [ ... m), never printed as they are
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """`text` with every control character written as an escape (`\\r`, `\\x1b`, `\\n`): what the CLI
    prints of anything read from a file (an entry's note, a path, a run id), so a ledger entry cannot
    rewrite the line a reader sees or hide what follows."""
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], text)


class CapsuleError(Exception):
    """Base class: a problem the user can act on, described in one line (what, where, how to fix)."""

    exit_code: int = 2


class BadInputError(CapsuleError):
    """A file, option or setting the user gave is malformed or inconsistent."""

    exit_code = 2


class UnavailableError(CapsuleError):
    """Something the capsule needs cannot be reached or imported here (network, wheel, package)."""

    exit_code = 2


class BusyError(CapsuleError):
    """Another capsule process is writing the same run directory or ledger (see `capsule.locks`)."""

    exit_code = 2


class VerificationError(CapsuleError):
    """A checksum, signature, seal or hash chain does not match what was recorded."""

    exit_code = 3
