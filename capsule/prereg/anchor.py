"""The ledger's anchor: every entry a trusted copy holds must still be there, byte for byte, in place.

A hash chain shows that no line was changed relative to the lines after it, but a chain rewritten
from some entry on (or truncated) is again a valid chain. An anchor is a copy of the ledger, or of
its head hash, kept where the writer of the file cannot quietly change it:

- a git revision (default `HEAD` when the ledger is inside a git checkout): the ledger as committed
  there, read with `git show REV:./ledger.jsonl`. Every complete line of it must be the same line
  of the ledger now; the ledger may only have grown since;
- a ledger head hash (64 hex digits) published elsewhere: some entry of the ledger must have that
  hash, which (through the chain) fixes every entry up to it.

What this does not anchor: whoever can rewrite the git history (force-push, a new clone) can rewrite
the ledger with it; signed commits, or a head hash published outside the repository, are the next
step. `prereg/README.md` says so for users.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from capsule.errors import BadInputError, VerificationError

DEFAULT_REVISION = "HEAD"
_HEAD_HASH = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class AnchorCheck:
    """What the anchor check established, in one line for `capsule prereg verify`."""

    anchored: bool
    description: str  # e.g. "anchored at git HEAD (commit 1a2b3c4d5e6f): its 14 entries unchanged"


def _git(directory: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run git in `directory` (no shell); the caller reads returncode, stdout and stderr."""
    return subprocess.run(["git", "-C", str(directory), *args], capture_output=True, check=False)


def _checkout_problem(directory: Path) -> str | None:
    """Why `directory` is not inside a git work tree (None when it is)."""
    if shutil.which("git") is None:
        return "git is not installed"
    probe = _git(directory, "rev-parse", "--is-inside-work-tree")
    if probe.returncode != 0 or probe.stdout.strip() != b"true":
        first = (probe.stderr.decode("utf-8", "replace").strip().splitlines() or ["not a git checkout"])[0]
        return f"{directory} is not inside a git checkout ({first})"
    return None


def _commit_of(directory: Path, revision: str) -> str | None:
    """The full commit id `revision` names in the checkout at `directory`, or None."""
    if revision.startswith("-"):
        return None  # never let a revision be read as an option
    found = _git(directory, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    return found.stdout.decode("ascii", "replace").strip() if found.returncode == 0 else None


def _committed_ledger(ledger_path: Path, commit: str) -> bytes:
    """The ledger's bytes at `commit` (empty if the file did not exist there yet)."""
    spec = f"{commit}:./{ledger_path.name}"
    if _git(ledger_path.parent, "cat-file", "-e", spec).returncode != 0:
        return b""
    shown = _git(ledger_path.parent, "show", spec)
    if shown.returncode != 0:
        raise BadInputError(
            f"{ledger_path}: git show {spec} failed: {shown.stderr.decode('utf-8', 'replace').strip()}"
        )
    return shown.stdout


def compare_with_anchor(ledger_path: Path, current: bytes, anchor: bytes, label: str) -> int:
    """Check that every complete line of `anchor` is the same line of `current`; the number of anchored
    entries, or VerificationError naming the first entry (seq) that was changed, moved or removed."""
    anchored = anchor.split(b"\n")[:-1]  # a torn last line of the anchor is not an entry
    now = current.split(b"\n")[:-1]
    for seq, line in enumerate(anchored, start=1):
        if seq > len(now):
            raise VerificationError(
                f"{ledger_path}: seq {seq}: in the ledger at {label} but missing now (the ledger was "
                f"truncated to {len(now)} entries; {len(anchored)} are anchored)"
            )
        if now[seq - 1] != line:
            raise VerificationError(
                f"{ledger_path}: seq {seq}: differs from the ledger at {label} (an anchored entry was "
                "rewritten, moved or removed; the ledger is append-only)"
            )
    return len(anchored)


def check_anchor(ledger_path: Path, current: bytes, hashes: list[str], anchor: str | None) -> AnchorCheck:
    """Check the ledger (its bytes `current`, its entries' `hashes` in order) against `anchor`: a git
    revision or a 64-hex head hash; None: `HEAD` if the ledger is in a git checkout, else nothing.

    BadInputError (exit 2) for an anchor that names nothing; VerificationError (exit 3) when the
    ledger departs from it.
    """
    directory = ledger_path.parent
    if anchor is not None and _HEAD_HASH.match(anchor) and anchor in hashes:
        seq = hashes.index(anchor) + 1
        return AnchorCheck(True, f"anchored at head hash {anchor[:16]}: entries 1-{seq} fixed by it")
    problem = _checkout_problem(directory)
    if problem is not None:
        if anchor is None:
            return AnchorCheck(
                False, f"not anchored: {problem}; pass --anchor HEAD_HASH to check a published head"
            )
        if _HEAD_HASH.match(anchor):
            raise VerificationError(
                f"{ledger_path}: no entry has the anchor head hash {anchor} (the ledger was rewritten or "
                "truncated, or the hash belongs to another ledger)"
            )
        raise BadInputError(f"--anchor {anchor}: not a head hash, and {problem}")
    revision = anchor if anchor is not None else DEFAULT_REVISION
    commit = _commit_of(directory, revision)
    if commit is None:
        if anchor is None:
            return AnchorCheck(False, "not anchored: the checkout has no commit yet")
        if _HEAD_HASH.match(anchor):
            raise VerificationError(
                f"{ledger_path}: no entry has the anchor head hash {anchor}, and it names no commit "
                "(the ledger was rewritten or truncated, or the hash belongs to another ledger)"
            )
        raise BadInputError(f"--anchor {anchor}: names no commit of the checkout at {directory}")
    label = f"git {revision} (commit {commit[:12]})"
    count = compare_with_anchor(ledger_path, current, _committed_ledger(ledger_path, commit), label)
    return AnchorCheck(True, f"anchored at {label}: its {count} entries unchanged")
