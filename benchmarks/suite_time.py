"""Where `make test` spends its time, from a clean clone: install, fetch, the two tiers, the slowest tests.

Clones this checkout into a temporary folder (as CI does), then times, one after the other,
`make setup` (the install), `make fetch` (prompts and the embedded model), the fast tier
(`make test-fast`, which must stay under 2 minutes) and the slow tier (`make test-slow`: the
real-model tests, the rest of `make test`), and prints the breakdown: phase times, seconds per
slow test file, the slowest tests, the CPU with the ISA flags its kernels dispatch on
(`capsule.machine.host.probe_cpu`, as a manifest records it) and the load average before and after
(a shared machine slows every figure). `--keep` leaves the clone for a second look.

    python3 benchmarks/suite_time.py --durations 15
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_line(clone: Path) -> str:
    """The CPU model, usable cores and the kernel ISA flags present, read by the clone's own capsule
    (`probe_cpu`), so this script parses no /proc/cpuinfo of its own."""
    probe = (
        "import json; from capsule.machine.host import probe_cpu; c = probe_cpu(); "
        "print(json.dumps([c['model'], c['usable_cores'], [f for f, on in c['isa'].items() if on]]))"
    )
    python = str(clone / ".venv" / "bin" / "python")
    result = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    if result.returncode != 0:
        return f"? (probe_cpu failed: {result.stderr.strip()[-200:]})"
    model, cores, isa = json.loads(result.stdout)
    return f"{model}; {cores} usable cores; ISA: {', '.join(isa)}"


def load() -> str:
    """The 1, 5 and 15 minute load averages (other work on the same cores slows every figure)."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


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


def durations(output: str) -> list[tuple[float, str, str]]:
    """The `--durations` lines pytest printed, slowest first, as (seconds, phase, test id)."""
    found = re.findall(r"^(\d+\.\d+)s (setup|call|teardown)\s+(\S+)", output, re.M)
    return [(float(seconds), phase, test) for seconds, phase, test in found]


def per_file(rows: list[tuple[float, str, str]]) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown summed), largest first."""
    files: dict[str, float] = {}
    for seconds, _, test in rows:
        files[test.split("::")[0]] = files.get(test.split("::")[0], 0.0) + seconds
    return dict(sorted(files.items(), key=lambda item: -item[1]))


def summary(output: str) -> str:
    """pytest's summary line of each invocation (counts of passed, skipped, ...): the slow tier is
    one (`make test-slow`: two workers, each pinned to its own core)."""
    lines = [line.strip("= ") for line in output.splitlines() if re.search(r"\d+ passed.* in [\d.]+s", line)]
    return "; ".join(lines) or "?"


def main() -> None:
    """Clone, install, fetch, run both tiers; print the phase times, the slow files, the slowest tests."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durations", type=int, default=15, help="how many of the slowest tests to list")
    parser.add_argument("--keep", action="store_true", help="keep the clone")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="capsule-suite-"))
    clone, log = work / "check", work / "log.txt"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    if (ROOT.parent / "shared").is_dir():  # CI lays ../shared beside the clone; so does this
        (work / "shared").symlink_to(ROOT.parent / "shared")
    load_before, phases, outputs = load(), {}, {}
    phases["install (make setup)"], _ = timed(["make", "setup"], clone, log)
    phases["fetch (make fetch)"], _ = timed(["make", "fetch"], clone, log)
    every = "--durations=0 --durations-min=0.5"
    fast, slow = "fast tier (make test-fast)", "slow tier (make test-slow)"  # together: `make test`
    phases[fast], outputs[fast] = timed(["make", "test-fast", f"PYTEST_ARGS={every}"], clone, log)
    phases[slow], outputs[slow] = timed(["make", "test-slow", f"PYTEST_ARGS={every}"], clone, log)
    print(f"CPU: {cpu_line(clone)}")
    print(f"load average (1, 5, 15 min): {load_before} before, {load()} after")
    for phase, seconds in phases.items():
        print(f"{phase:<28} {seconds:7.1f} s   {summary(outputs.get(phase, ''))}")
    print(f"{'total (make test)':<28} {sum(phases.values()):7.1f} s")
    print("slow tier, seconds per file:")
    for path, seconds in per_file(durations(outputs[slow])).items():
        print(f"  {seconds:7.1f}  {path}")
    rows = sorted((row for output in outputs.values() for row in durations(output)), reverse=True)
    print(f"slowest {args.durations} tests:")
    for seconds, phase, test in rows[: args.durations]:
        print(f"  {seconds:7.2f}s {phase:<8} {test}")
    if args.keep:
        print(f"clone and log kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
