"""Where `make test` spends its time, from a clean clone: install, fetch, and the slowest tests.

Clones this checkout into a temporary folder (as CI does), then times, one after the other,
`make setup` (the install), `make fetch` (prompts and the embedded model) and the suite itself
(`make test` with `--durations`), and prints the breakdown with the CPU it ran on. Run it on a quiet
machine; `--keep` leaves the clone for a second look.

    python3 benchmarks/suite_time.py --durations 15
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_line() -> str:
    """The CPU model and the vector ISA flags that change kernel speed (AVX2, AVX-512, bf16, AMX)."""
    model, flags = platform.processor() or "?", set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        text = cpuinfo.read_text()
        if found := re.search(r"^model name\s*:\s*(.+)$", text, re.M):
            model = found.group(1).strip()
        if found := re.search(r"^flags\s*:\s*(.+)$", text, re.M):
            flags = set(found.group(1).split())
    shown = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return f"{model}; {len(os.sched_getaffinity(0))} usable cores; ISA: {', '.join(shown)}"


def timed(command: list[str], cwd: Path, log: Path) -> tuple[float, str]:
    """Run `command` in `cwd`, appending its output to `log`; return (seconds, output). Fails loudly."""
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    with log.open("a", encoding="utf-8") as handle:
        handle.write(f"$ {' '.join(command)}\n{result.stdout}{result.stderr}\n")
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed (exit {result.returncode}); see {log}")
    return elapsed, result.stdout + result.stderr


def slowest(output: str, n: int) -> list[str]:
    """The `--durations` lines pytest printed (slowest first), at most `n`."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "slowest" in line and "durations" in line), None)
    if start is None:
        return []
    found = [line for line in lines[start + 1 :] if re.match(r"^\d+\.\d+s ", line)]
    return found[:n]


def main() -> None:
    """Clone, install, fetch, test; print the phase times, the slowest tests and the CPU."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durations", type=int, default=15, help="how many of the slowest tests to list")
    parser.add_argument("--keep", action="store_true", help="keep the clone")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="capsule-suite-"))
    clone, log = work / "check", work / "log.txt"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    if (ROOT.parent / "shared").is_dir():  # CI lays ../shared beside the clone; so does this
        (work / "shared").symlink_to(ROOT.parent / "shared")
    phases = {}
    phases["install (make setup)"], _ = timed(["make", "setup"], clone, log)
    phases["fetch (make fetch)"], _ = timed(["make", "fetch"], clone, log)
    durations = f"PYTEST_ARGS=--durations={args.durations}"
    phases["pytest (make test)"], output = timed(["make", "test", durations], clone, log)
    summary = next((line for line in reversed(output.splitlines()) if " passed" in line), "?")
    print(f"CPU: {cpu_line()}")
    for phase, seconds in phases.items():
        print(f"{phase:<24} {seconds:7.1f} s")
    print(f"{'total':<24} {sum(phases.values()):7.1f} s   ({summary.strip('= ')})")
    print(f"slowest {args.durations} tests:")
    for line in slowest(output, args.durations):
        print(f"  {line}")
    if args.keep:
        print(f"clone and log kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
