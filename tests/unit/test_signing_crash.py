"""Signing survives a SIGKILL: a `capsule reproduce` killed at each signing step (`capsule.faults`),
then run again, finishes the same run directory with exactly one ledger entry, and it verifies."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_plan import PLAN_DIR, PLAN_NAME, capsule_process, write_and_seal_fake_plan

from capsule.cli import cli
from capsule.faults import KILL_AT_ENV, SIGNING_POINTS
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import BundleEntry

REPRODUCE = ["reproduce", "--no-progress", "--plan", str(PLAN_DIR)]


def _bundle_entries(run_id: str) -> list[BundleEntry]:
    return Ledger.load(Path("prereg/ledger.jsonl")).bundle_entries(run_id)


def _killed_at(point: str, root: Path) -> Path:
    """Seal the fake plan, run reproduce in a child killed at `point`; return the run directory."""
    assert CliRunner().invoke(cli, ["keygen"]).exit_code == 0
    write_and_seal_fake_plan(root)
    child = capsule_process(REPRODUCE, root, {KILL_AT_ENV: point})
    _, stderr = child.communicate(timeout=300)
    assert child.returncode == -signal.SIGKILL, stderr
    (run,) = (root / "results" / PLAN_NAME).iterdir()
    return run


def _check_finished(run: Path) -> None:
    """One run directory, one bundle entry for it, whole rows, and `capsule verify` passes."""
    assert [p.name for p in run.parent.iterdir()] == [run.name]
    assert len(_bundle_entries(run.name)) == 1
    rows = [json.loads(line) for line in (run / "generations" / "fake-a.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and len({r["key"] for r in rows}) == 8
    assert "**FAKE DATA:** 1 of 1 arms (fake-a) ran on the fake backend" in (run / "RESULTS.md").read_text()
    verified = CliRunner().invoke(cli, ["verify", str(run)])
    assert verified.exit_code == 0, verified.output + verified.stderr


def _rerun_finishes(run: Path, root: Path) -> str:
    """The same command again, in a fresh process as a user would run it; returns its stderr."""
    child = capsule_process(REPRODUCE, root)
    _, stderr = child.communicate(timeout=300)
    assert child.returncode == 0, stderr
    assert f"resuming run {run.name}" in stderr
    _check_finished(run)
    return stderr


def test_kill_between_envelope_and_ledger_entry_is_finished_by_a_rerun(repo_copy: Path) -> None:
    """The case that stranded runs: bundle.json and bundle.dsse.json written, no ledger entry."""
    run = _killed_at("before-ledger", repo_copy)
    assert (run / "bundle.dsse.json").exists() and not _bundle_entries(run.name)
    assert CliRunner().invoke(cli, ["verify", str(run)]).exit_code == 3  # not finished yet: says so
    assert "signed again" in _rerun_finishes(run, repo_copy)


@pytest.mark.slow
def test_killed_at_every_signing_step_in_turn_each_rerun_resumes_the_run(repo_copy: Path) -> None:
    """One run, killed at each signing step in turn: every rerun resumes the same run directory and
    is killed at the next step, with no ledger entry until the last (killed just after appending it),
    which leaves the run finished. Each step is thereby reached from a resumed run (the harder case),
    in five processes instead of two per step."""
    points = [p for p in SIGNING_POINTS if p != "before-ledger"]  # before-ledger: the fast test above
    assert points[-1] == "after-ledger"
    run = _killed_at(points[0], repo_copy)
    for point in points[1:]:
        assert not _bundle_entries(run.name), point
        child = capsule_process(REPRODUCE, repo_copy, {KILL_AT_ENV: point})
        _, stderr = child.communicate(timeout=300)
        assert child.returncode == -signal.SIGKILL, stderr
        assert f"resuming run {run.name}" in stderr, point
    _check_finished(run)  # the entry is appended: the run is finished
