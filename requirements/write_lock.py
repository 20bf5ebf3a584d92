"""Write requirements/cpu.lock from a pip installation report (`pip install --dry-run --report`).

Used by scripts/lock_cpu.sh only. Each line pins one distribution to the exact file pip chose for this
platform and Python, by version and sha256, so `pip install --require-hashes --no-deps -r cpu.lock`
installs byte-identical packages on every run. The header records the digest of pyproject.toml's
dependency declarations, so setup can tell a stale lock from a fresh one (scripts/setup_cpu_venv.sh).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lock_digest import declared_dependencies_sha256


def lock_lines(report: dict) -> list[str]:
    """One `name==version --hash=sha256:...` line per distribution in the report, sorted by name."""
    lines = []
    for item in report["install"]:
        name = item["metadata"]["name"].lower().replace("_", "-")
        version = item["metadata"]["version"]
        digest = item["download_info"]["archive_info"]["hashes"]["sha256"]
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{digest}")
    return sorted(lines)


def main(report_path: str, pyproject: str, out: str) -> None:
    """Write the lock `out` from the pip report at `report_path` and the project's `pyproject`."""
    report = json.loads(Path(report_path).read_text(encoding="utf-8"))
    header = [
        "# The CPU stack, hash-locked: `make setup` installs exactly this with --require-hashes --no-deps.",
        "# Regenerate with `make lock-cpu` (needs the package index), then commit. Do not edit by hand.",
        f"# python {sys.version_info.major}.{sys.version_info.minor}, linux x86_64 (manylinux_2_28)",
        f"# declared-dependencies-sha256: {declared_dependencies_sha256(Path(pyproject))}",
    ]
    Path(out).write_text("\n".join(header + lock_lines(report)) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:4])
