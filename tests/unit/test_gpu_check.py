"""scripts/gpu_check.sh, the check for the first lent GPU: without CUDA it says so in one line (exit 2);
its Python part runs the same path on the CPU with a tiny stand-in model (only CUDA is new on a GPU).
No GPU has run it: this session was lent none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_without_cuda_it_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    env = {**os.environ, "CAPSULE_PYTHON": sys.executable, "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_check.sh"), str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: CUDA is absent")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_check_runs_end_to_end_on_the_cpu_with_a_tiny_stand_in(tmp_path: Path) -> None:
    args = [
        "--device",
        "cpu",
        "--prompts",
        "12",
        "--tokens",
        "8",
        "--layers",
        "1",
        "--width",
        "128",
        "--vocab",
        "512",
    ]
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu_check.py"), str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("\n") == 1 and result.stdout.startswith("gpu_check on cpu")
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert set(report["contrasts"]) == {
        "b8-vs-b1", "b16-vs-b1", "b16-vs-b8", "rerun-b16", "sampled-rerun-b16", "sampled-b8-vs-b16"
    }
    assert report["contrasts"]["rerun-b16"]["identical"] == 12  # same batch twice: identical
    assert report["contrasts"]["sampled-rerun-b16"]["identical"] == 12  # per-row streams: identical too
    assert report["draws_device_vs_cpu"] == {"identical": 64, "of": 64}
    assert report["manifest"]["diff_vs_h200_fixture"]["numerics"] > 0  # a CPU is not the H200
    assert (tmp_path / "manifest.json").is_file() and "numerics" in (
        tmp_path / "manifest-diff.txt"
    ).read_text()
