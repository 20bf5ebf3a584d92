"""The digest of what pyproject.toml declares as the CPU stack: its dependencies and extras.

A lock made from other declarations is stale. Only the dependency lists count, so editing pytest's
markers or ruff's settings in pyproject.toml does not force a new lock.
Usage: `python requirements/lock_digest.py pyproject.toml` prints the hex sha256.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tomllib
from pathlib import Path

LOCKED_EXTRAS = ("cpu", "dev")  # the extras scripts/lock_cpu.sh installs


def declared_dependencies_sha256(pyproject: Path) -> str:
    """sha256 of the canonical JSON of [project] dependencies and the locked extras."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    extras = project.get("optional-dependencies", {})
    declared = {
        "dependencies": project.get("dependencies", []),
        "extras": {name: extras.get(name, []) for name in LOCKED_EXTRAS},
    }
    canonical = json.dumps(declared, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


if __name__ == "__main__":
    print(declared_dependencies_sha256(Path(sys.argv[1])))
