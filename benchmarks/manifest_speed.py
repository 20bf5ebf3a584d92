"""How long `capsule manifest` takes, measured side by side with a bare interpreter start.

The manifest is built at the start of every run and by `capsule manifest`; it must stay a
fraction of a model load. This prints the command's wall time, the time of `python -c pass` in the
same run, and their ratio (best of `--repeats`, interleaved, because the machine may be shared).

    .venv/bin/python benchmarks/manifest_speed.py --repeats 5
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(command: list[str]) -> float:
    """Wall seconds of one run of `command` (which must succeed)."""
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    """Interleave bare-interpreter and `capsule manifest` runs; print the best of each and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "manifest.json"
        bare, manifest = [], []
        for _ in range(args.repeats):
            bare.append(timed([sys.executable, "-c", "pass"]))
            manifest.append(timed([sys.executable, "-m", "capsule", "manifest", "--out", str(out)]))
    print(f"python -c pass:    best {min(bare):.3f} s")
    print(f"capsule manifest:  best {min(manifest):.3f} s")
    print(f"ratio:             {min(manifest) / min(bare):.1f}x a bare interpreter start")


if __name__ == "__main__":
    main()
