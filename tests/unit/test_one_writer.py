"""One writer at a time (`capsule.locks`): a run directory or the ledger held by another process is
refused with its pid and left untouched; a killed holder never blocks; two reproduce started together
leave one complete run and one refusal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_plan import REPO, capsule_process

from capsule.cli import cli
from capsule.errors import BusyError
from capsule.locks import hold
from capsule.prereg import ledger as ledger_module
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import SealEntry

_HOLDER = """
import sys, time
from pathlib import Path
from capsule.locks import hold
with hold(Path(sys.argv[1]), "test"):
    print("held", flush=True)
    time.sleep(600)
"""


@contextmanager
def held_elsewhere(directory: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding `directory`'s lock until the block ends (then SIGKILLed)."""
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(directory)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        yield child
    finally:
        child.kill()
        child.wait()


def test_a_held_directory_is_refused_naming_the_holder(tmp_path: Path) -> None:
    with held_elsewhere(tmp_path) as holder, pytest.raises(BusyError) as refused:
        with hold(tmp_path, f"run directory {tmp_path}"):
            pass
    message = str(refused.value)
    assert f"pid {holder.pid}" in message and str(tmp_path) in message and "\n" not in message


def test_a_sigkilled_holder_never_blocks(tmp_path: Path) -> None:
    with held_elsewhere(tmp_path) as holder:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        with hold(tmp_path, "run directory"):  # released by the kernel with the dead process
            pass


def test_the_lock_is_reentrant_within_one_process(tmp_path: Path) -> None:
    with hold(tmp_path, "outer"), hold(tmp_path, "inner"):
        pass
    with held_elsewhere(tmp_path):  # and fully released after the outer block
        with pytest.raises(BusyError):
            with hold(tmp_path, "again"):
                pass


def test_ledger_held_elsewhere_is_never_appended(repo_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_module, "LEDGER_WAIT_S", 0.2)
    path = repo_copy / "prereg" / "ledger.jsonl"
    before = path.read_bytes()
    ledger = Ledger.load(path)
    with held_elsewhere(path.parent) as holder, pytest.raises(BusyError, match=f"pid {holder.pid}"):
        ledger.append(SealEntry(path="prereg/smoke/rationale.md", sha256="0" * 64, note="x"))
    assert path.read_bytes() == before


def test_generate_into_a_run_directory_held_elsewhere_is_refused(repo_copy: Path) -> None:
    out = repo_copy / "runs" / "mine"
    with held_elsewhere(out / "dry-run") as holder:  # where a dry run with --out writes
        result = CliRunner().invoke(cli, ["generate", "--dry-run", "--no-progress", "--out", str(out)])
    assert result.exit_code == 2, result.output + result.stderr
    assert f"pid {holder.pid}" in result.stderr and "Traceback" not in result.stderr
    assert list((out / "dry-run").iterdir()) == []  # nothing written


def test_two_reproduce_started_together_leave_one_run_and_one_refusal(repo_copy: Path) -> None:
    args = ["reproduce", "--no-progress", "--plan", "prereg/smoke-v2", "--dry-run"]
    first = capsule_process(args, repo_copy)
    runs = repo_copy / "runs" / "dry-run" / "smoke"
    deadline = time.monotonic() + 120
    while not list(runs.glob("*/run.json")) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    second = capsule_process(args, repo_copy)  # starts while the first is generating
    (_, first_err), (_, second_err) = first.communicate(timeout=300), second.communicate(timeout=300)
    assert first.returncode == 0, first_err
    assert second.returncode == 2, second_err
    (line,) = [line for line in second_err.splitlines() if line.startswith("Error:")]
    assert f"pid {first.pid}" in line and "being written by another capsule process" in line
    (run,) = runs.iterdir()
    assert (run / "bundle.dsse.json").exists()
    for rows_file in (run / "generations").glob("*.jsonl"):
        keys = [json.loads(row)["key"] for row in rows_file.read_text().splitlines()]
        assert len(keys) == len(set(keys)) == 8, rows_file
    rerun = CliRunner().invoke(cli, args)  # and the finished run is left as it is: a new one starts
    assert rerun.exit_code == 0 and f"resuming run {run.name}" not in rerun.stderr
