"""`capsule report --resign` survives a SIGKILL: killed at each of its steps (`capsule.faults`), the
run is refused by `capsule verify` with the command that repairs it, and that command (the same
re-sign, run again) finishes or undoes the interrupted one, so the run verifies with a fresh report
and exactly one new ledger entry."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_plan import PLAN_DIR, PLAN_NAME, capsule_process, write_and_seal_fake_plan

from capsule.cli import cli
from capsule.evidence.signing import load_signing_key
from capsule.faults import KILL_AT_ENV, RESIGN_POINTS, SIGNING_POINTS
from capsule.pipeline.resign import sign_again
from capsule.prereg.ledger import Ledger
from capsule.run_dir import RunDir

#: Every step a re-sign passes through: its own two, then the bundle's (`sign_again`).
POINTS = RESIGN_POINTS + tuple(p for p in SIGNING_POINTS if p not in ("before-report", "before-bundle"))


def _bundle_entries(run: Path) -> int:
    return len(Ledger.load(Path("prereg/ledger.jsonl")).bundle_entries(run.name))


@pytest.fixture(scope="module")
def stale_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once for the module, never changed: a repository root (a copy of prereg/, its own config
    directory and key) holding a signed run of the fake plan whose RESULTS.md is not what this version
    renders (a sentence was added before it was signed), so `report --resign` has documents to rewrite."""
    root = tmp_path_factory.mktemp("stale")
    shutil.copytree(Path(__file__).resolve().parents[2] / "prereg", root / "prereg")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(root)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "config"))
        monkeypatch.delenv("CAPSULE_SIGNING_KEY", raising=False)
        assert CliRunner().invoke(cli, ["keygen"]).exit_code == 0
        write_and_seal_fake_plan(root)
        made = CliRunner().invoke(cli, ["reproduce", "--no-progress", "--plan", str(PLAN_DIR)])
        assert made.exit_code == 0, made.output + made.stderr
        (run,) = (root / "results" / PLAN_NAME).iterdir()
        results = RunDir(run).results
        results.write_text(results.read_text(encoding="utf-8") + "\nAn older rendering.\n", encoding="utf-8")
        sign_again(run, key=load_signing_key()[0], ledger=Ledger.load(Path("prereg/ledger.jsonl")))
        assert CliRunner().invoke(cli, ["verify", str(run)]).exit_code == 0
        assert CliRunner().invoke(cli, ["report", str(run), "--check"]).exit_code == 3
    return root


@pytest.fixture()
def repo_copy(stale_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This module's repository root: a private copy of `stale_root` at tmp_path, made the working
    directory with its own config directory (as tests/conftest.py's `repo_copy`)."""
    shutil.copytree(stale_root, tmp_path, symlinks=True, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("CAPSULE_SIGNING_KEY", raising=False)
    return tmp_path


@pytest.fixture()
def stale_run(repo_copy: Path) -> Path:
    """The stale signed run, in this test's copy of the root."""
    (run,) = (repo_copy / "results" / PLAN_NAME).iterdir()
    return run


def _resign_killed_at(point: str, run: Path, root: Path) -> None:
    child = capsule_process(["report", str(run), "--resign"], root, {KILL_AT_ENV: point})
    _, stderr = child.communicate(timeout=300)
    assert child.returncode == -signal.SIGKILL, stderr


def _resign_again(run: Path, root: Path) -> str:
    """The same re-sign in a fresh process, as a user would run it; returns its stderr."""
    child = capsule_process(["report", str(run), "--resign"], root)
    stdout, stderr = child.communicate(timeout=300)
    assert child.returncode == 0, stdout + stderr
    return stderr


def _check_repaired(run: Path, entries_before: int) -> None:
    """No journal, no temporaries, a fresh report, one new ledger entry, and the run verifies."""
    assert not RunDir(run).resign_journal.exists()
    assert not list(run.rglob("*.part"))
    assert "An older rendering" not in RunDir(run).results.read_text(encoding="utf-8")
    assert _bundle_entries(run) == entries_before + 1
    verified = CliRunner().invoke(cli, ["verify", str(run)])
    assert verified.exit_code == 0, verified.output + verified.stderr
    assert CliRunner().invoke(cli, ["report", str(run), "--check"]).exit_code == 0


def _killed_then_repaired(point: str, run: Path, root: Path) -> str:
    entries = _bundle_entries(run)
    _resign_killed_at(point, run, root)
    assert RunDir(run).resign_journal.exists()
    refused = CliRunner().invoke(cli, ["verify", str(run)])
    assert refused.exit_code == 3
    assert "was interrupted" in refused.stderr and f"capsule report {run} --resign" in refused.stderr
    stderr = _resign_again(run, root)
    _check_repaired(run, entries)
    return stderr


def test_kill_after_new_documents_is_undone_then_resigned(stale_run: Path, repo_copy: Path) -> None:
    """The state that stranded runs: RESULTS.md rewritten, the old signature over the old one."""
    stderr = _killed_then_repaired("resign-documents", stale_run, repo_copy)
    assert "put back the signed files" in stderr


@pytest.mark.slow
@pytest.mark.parametrize("point", [p for p in POINTS if p != "resign-documents"])
def test_kill_at_each_resign_step_then_rerun(point: str, stale_run: Path, repo_copy: Path) -> None:
    stderr = _killed_then_repaired(point, stale_run, repo_copy)
    expected = {"resign-journaled": "had not changed", "after-ledger": "had finished"}
    assert expected.get(point, "put back the signed files") in stderr


def test_restore_removes_a_temporary_left_by_a_killed_write(stale_run: Path, repo_copy: Path) -> None:
    """A kill inside an atomic write leaves `.RESULTS.md.*.part` beside the file: an extra file the
    bundle does not list. Undoing the re-sign removes it."""
    entries = _bundle_entries(stale_run)
    _resign_killed_at("resign-documents", stale_run, repo_copy)
    (stale_run / ".RESULTS.md.x1y2.part").write_bytes(b"half a report")
    (stale_run / "plots" / "new.png").write_bytes(b"a plot the old run did not have")
    assert "put back the signed files" in _resign_again(stale_run, repo_copy)
    _check_repaired(stale_run, entries)
    assert not (stale_run / "plots" / "new.png").exists()


def test_journal_without_its_index_is_dropped(stale_run: Path, repo_copy: Path) -> None:
    """Killed while the journal was being written: nothing in the run had changed, so the journal is
    removed and the re-sign goes ahead."""
    journal = RunDir(stale_run).resign_journal
    (journal / "files").mkdir(parents=True)
    (journal / "files" / "RESULTS.md").write_bytes(b"half a copy")
    entries = _bundle_entries(stale_run)
    assert "had not changed" in _resign_again(stale_run, repo_copy)
    _check_repaired(stale_run, entries)
