"""The ledger's anchor: every entry a trusted copy holds must still be there, byte for byte, in place.

A hash chain shows that no line was changed relative to the lines after it, but a chain rewritten
from some entry on (or truncated) is again a valid chain. An anchor is a copy of the ledger, or of
its head hash, kept where the writer of the file cannot quietly change it:

- a git revision (default `HEAD` when the ledger is inside a git checkout): the ledger as committed
  there, read with `git show REV:./ledger.jsonl`. Every complete line of it must be the same line
  of the ledger now; the ledger may only have grown since;
- a ledger head hash (64 hex digits) published elsewhere: some entry of the ledger must have that
  hash, which (through the chain) fixes every entry up to it.

Without `--anchor`, the ledger is checked against every anchor the checkout has: `HEAD`; the
branch's remote-tracking branch (`@{upstream}` under refs/remotes/, what was last fetched from the
published repository), which may be ahead of the checkout (a ledger behind the published one is
not a rewrite) but must agree line for line as far as both go; and a head hash pinned in the
environment (`CAPSULE_LEDGER_ANCHOR`, kept outside the repository). A history rewritten and
committed locally still departs from the remote-tracking branch and from a pinned head.

What this does not anchor, offline: whoever can rewrite the published history too (force-push,
then a fresh clone) can rewrite the ledger with it, and a clone with no remote and no pinned head
has only its own HEAD. A head hash published outside the repository, or signed commits, are the
answer; `prereg/README.md` says so for users.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from capsule.errors import BadInputError, VerificationError

DEFAULT_REVISION = "HEAD"
PIN_ENV = "CAPSULE_LEDGER_ANCHOR"  # a ledger head hash (or git revision) pinned outside the repository
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


def _upstream(directory: Path) -> str | None:
    """The checkout's remote-tracking branch (`@{upstream}` when it is under refs/remotes/), else None."""
    found = _git(directory, "rev-parse", "--symbolic-full-name", "@{upstream}")
    name = found.stdout.decode("utf-8", "replace").strip()
    if found.returncode != 0 or not name.startswith("refs/remotes/"):
        return None
    return name


def _common_lines(current: bytes, other: bytes) -> tuple[int, int]:
    """(how many leading complete lines the two ledgers share, the first seq where they differ or 0)."""
    a, b = current.split(b"\n")[:-1], other.split(b"\n")[:-1]
    for index, (mine, theirs) in enumerate(zip(a, b, strict=False)):
        if mine != theirs:
            return index, index + 1
    return min(len(a), len(b)), 0


def check_anchor(ledger_path: Path, current: bytes, hashes: list[str], anchor: str | None) -> AnchorCheck:
    """Check the ledger (its bytes `current`, its entries' `hashes` in order) against `anchor`: a git
    revision or a 64-hex head hash; None: every anchor the checkout has (`HEAD`, the remote-tracking
    branch, a head pinned in `CAPSULE_LEDGER_ANCHOR`), nothing outside a git checkout but the pin.

    BadInputError (exit 2) for an anchor that names nothing; VerificationError (exit 3) when the
    ledger departs from it.
    """
    if anchor is not None:
        return _check_one(ledger_path, current, hashes, anchor)
    checks = [_check_one(ledger_path, current, hashes, None)]
    if checks[0].anchored:
        remote = _upstream(ledger_path.parent)
        if remote is not None:
            checks.append(_check_remote(ledger_path, current, remote))
    pinned = os.environ.get(PIN_ENV, "").strip()
    if pinned:
        checks.append(_check_one(ledger_path, current, hashes, pinned))
    held = [check for check in checks if check.anchored]
    if not held:
        return checks[-1]
    return AnchorCheck(True, "; ".join(check.description for check in held))


def _check_remote(ledger_path: Path, current: bytes, remote: str) -> AnchorCheck:
    """The ledger against its published copy at the remote-tracking branch: it may be behind or ahead,
    but every line both hold must be the same line."""
    commit = _commit_of(ledger_path.parent, remote)
    if commit is None:
        return AnchorCheck(False, f"not anchored at {remote}: it names no commit")
    published = _committed_ledger(ledger_path, commit)
    shared, differs = _common_lines(current, published)
    label = f"{remote.removeprefix('refs/remotes/')} (commit {commit[:12]})"
    if differs:
        raise VerificationError(
            f"{ledger_path}: seq {differs}: differs from the published ledger at {label} (the history "
            "was rewritten; the ledger is append-only)"
        )
    behind = len(published.split(b"\n")) - 1 - shared
    note = f", {behind} newer published entries not pulled yet" if behind > 0 else ""
    return AnchorCheck(True, f"agrees with the published ledger at {label}: {shared} entries{note}")


def anchored_entries(ledger_path: Path, current: bytes, hashes: list[str]) -> int:
    """How many leading entries of the ledger an anchor outside the file fixes: up to the head pinned
    in `CAPSULE_LEDGER_ANCHOR`, else those shared with the remote-tracking branch, else with `HEAD`;
    0 outside a git checkout. What `capsule.evidence.trust` asks before honouring a signers entry
    that vouches for a signature made before it."""
    pinned = os.environ.get(PIN_ENV, "").strip()
    if _HEAD_HASH.match(pinned) and pinned in hashes:
        return hashes.index(pinned) + 1
    directory = ledger_path.parent
    if _checkout_problem(directory) is not None:
        return 0
    revision = _upstream(directory) or DEFAULT_REVISION
    commit = _commit_of(directory, revision)
    if commit is None:
        return 0
    return _common_lines(current, _committed_ledger(ledger_path, commit))[0]


def _check_one(ledger_path: Path, current: bytes, hashes: list[str], anchor: str | None) -> AnchorCheck:
    """The ledger against one anchor: a git revision or a head hash; None: `HEAD` in a checkout."""
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
