"""The slow tier's workers each hold one core of their own (tests/conftest.py, docs/tests.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PIN_CORES_ENV = "CAPSULE_TEST_PIN_CORES"  # what the Makefile sets and tests/conftest.py reads


@pytest.mark.slow
def test_a_pinned_slow_worker_and_its_children_see_one_core() -> None:
    """Under `make test-slow` this worker was pinned at import, before torch: so it, a process it
    starts, and torch's thread pool in that process all see one core."""
    if os.environ.get(PIN_CORES_ENV) != "1" or "PYTEST_XDIST_WORKER" not in os.environ:
        pytest.skip(f"run by `make test-slow` ({PIN_CORES_ENV}=1 on pytest-xdist workers)")
    assert len(os.sched_getaffinity(0)) == 1
    probe = "import os, torch; print(len(os.sched_getaffinity(0)), torch.get_num_threads())"
    child = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert child.stdout.split() == ["1", "1"]
