"""Helpers shared by the anchor and forgery tests: a temporary git repository, and a forger's
rewrite of a ledger that keeps the hash chain valid (so only the anchor can catch it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from capsule.hashing import canonical_json
from capsule.prereg.chain import GENESIS, entry_hash


def git(root: Path, *args: str) -> str:
    """Run git in `root` with a fixed identity; its stdout (a failure raises)."""
    done = subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=test", "-c", "user.email=test@example.invalid",
         "-c", "commit.gpgsign=false", *args],
        capture_output=True, check=True, text=True,
    )
    return done.stdout.strip()


def commit_all(root: Path, message: str) -> str:
    """`git init` (once), add everything, commit; the new commit's id."""
    if not (root / ".git").exists():
        git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def read_entries(ledger: Path) -> list[dict[str, Any]]:
    """The ledger's entries, parsed (one per `\\n`-terminated line)."""
    return [json.loads(line) for line in ledger.read_bytes().split(b"\n")[:-1]]


def write_rechained(ledger: Path, entries: list[dict[str, Any]]) -> None:
    """Write `entries` as a valid chain: renumber `seq`, relink `prev` and an import's `seal`,
    recompute every `hash`, as a forger who rewrites history would."""
    prev, lines, renamed = GENESIS, [], {}
    for seq, entry in enumerate(entries, start=1):
        old_hash = entry.get("hash")
        entry = {key: value for key, value in entry.items() if key != "hash"}
        entry["seq"], entry["prev"] = seq, prev
        if entry.get("seal") in renamed:  # an import names the seal it was made against: relink it too
            entry["seal"] = renamed[entry["seal"]]
        entry["hash"] = prev = entry_hash(entry)
        if old_hash is not None:
            renamed[old_hash] = entry["hash"]
        lines.append(canonical_json(entry) + b"\n")
    ledger.write_bytes(b"".join(lines))
