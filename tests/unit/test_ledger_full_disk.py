"""Issue 26, finding 6: the ledger cannot be bricked. A write that fails midway (a full disk) appends
nothing and is one `Error:` line; a torn last line left by a crash is no entry, is named by
`prereg verify` and is cut by the next writer; a seal (companions and plan) is one write decided
under the ledger's lock, so two seals at once are one seal and one no-op; a companion reached through
a symlink is refused at seal, before anything is appended."""

from __future__ import annotations

import errno
import multiprocessing
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from capsule.cli import cli
from capsule.prereg import ledger as ledger_module
from capsule.prereg.ledger import Ledger, verify_ledger
from capsule.prereg.sealing import seal_plan

LEDGER = Path("prereg/ledger.jsonl")


@pytest.fixture
def repo(tmp_path: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary repo root with a copy of the smoke plan, sealed, and of the smollm2 plan (unsealed,
    outside prereg/ until a test moves it in: `second_plan`); cwd is the root."""
    shutil.copytree(repo_root / "prereg" / "smoke", tmp_path / "prereg" / "smoke")
    shutil.copytree(repo_root / "prereg" / "smollm2-135m", tmp_path / "drafts" / "smollm2-135m")
    monkeypatch.chdir(tmp_path)
    assert prereg("seal", "prereg/smoke", "--note", "first").exit_code == 0
    return tmp_path


def second_plan(repo: Path) -> str:
    """Move the unsealed smollm2 plan into prereg/ (where every plan must then be sealed)."""
    shutil.move(repo / "drafts" / "smollm2-135m", repo / "prereg" / "smollm2-135m")
    return "prereg/smollm2-135m"


def prereg(*args: str) -> Result:
    return CliRunner().invoke(cli, ["prereg", *args])


class FullDisk:
    """A file handle whose write puts the first half of the bytes on disk, then fails with ENOSPC."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def __enter__(self) -> FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()

    def write(self, data: bytes) -> int:
        self.handle.write(data[: len(data) // 2])
        self.handle.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)


def full_disk(monkeypatch: pytest.MonkeyPatch, *, truncate_fails: bool = False) -> None:
    """Every ledger append hits a full disk; with `truncate_fails`, cutting back fails too."""
    monkeypatch.setattr(ledger_module, "open", lambda *a, **k: FullDisk(open(*a, **k)), raising=False)
    if truncate_fails:
        def no_truncate(fd: int, size: int) -> None:
            raise OSError(errno.EIO, "Input/output error")
        monkeypatch.setattr(ledger_module.os, "ftruncate", no_truncate)


def test_a_full_disk_during_seal_appends_nothing_and_is_one_error_line(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, plan = LEDGER.read_bytes(), second_plan(repo)
    with monkeypatch.context() as patch:
        full_disk(patch)
        result = prereg("seal", plan, "--note", "second")
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "No space left on device" in lines[0]
    assert "nothing was appended" in lines[0]
    assert LEDGER.read_bytes() == before  # all or nothing: neither a companion nor the plan
    Ledger.load(LEDGER).verify()
    again = prereg("seal", plan, "--note", "second")
    assert again.exit_code == 0, again.output
    verify_ledger(LEDGER)


def test_a_torn_last_line_is_named_by_verify_and_cut_by_the_next_writer(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk where even the cut-back fails (or a crash mid-write) leaves half an entry."""
    before, key = LEDGER.read_bytes(), "ab" * 32
    with monkeypatch.context() as patch:
        full_disk(patch, truncate_fails=True)
        assert prereg("signers", "prereg/smoke", "--add", key, "--reason", "r").exit_code == 2
    torn = LEDGER.read_bytes()
    assert torn.startswith(before) and len(torn) > len(before) and not torn.endswith(b"\n")
    assert len(Ledger.load(LEDGER).entries) == 3  # the torn line is no entry
    checked = prereg("verify")
    assert checked.exit_code == 0, checked.output
    assert f"note: the last {len(torn) - len(before)} bytes of prereg/ledger.jsonl are a torn append" in (
        checked.output
    )
    assert prereg("signers", "prereg/smoke", "--add", key, "--reason", "r").exit_code == 0
    data = LEDGER.read_bytes()
    assert data.startswith(before) and data.endswith(b"\n") and Ledger.load(LEDGER).torn == 0
    assert len(verify_ledger(LEDGER).entries) == 4


def test_an_edited_last_line_without_its_newline_is_still_refused(repo: Path) -> None:
    """Only a line that is no complete JSON value is a torn append; an entry whose newline was taken
    away is an edit, refused as before."""
    LEDGER.write_bytes(LEDGER.read_bytes().rstrip(b"\n"))
    result = prereg("verify")
    assert result.exit_code == 3 and "the last line has no newline" in result.stderr


@pytest.mark.parametrize("byte", [b"\xd9", b"\xff", b"X", b" "])
def test_a_last_newline_flipped_into_another_byte_is_refused(repo: Path, byte: bytes) -> None:
    """The final newline changed into any other byte (a non-ASCII one included, which is no UTF-8)
    leaves a complete entry plus one byte: an edit, never a torn append that would drop the entry."""
    LEDGER.write_bytes(LEDGER.read_bytes()[:-1] + byte)
    result = prereg("verify")
    assert result.exit_code == 3 and "the last line has no newline" in result.stderr


def _seal(barrier: Any, root: str, plan: str, results: Any) -> None:
    import os

    os.chdir(root)
    barrier.wait()
    try:
        results.put(len(seal_plan(Path(plan), "raced", LEDGER)))
    except Exception as error:  # noqa: BLE001 - reported to the parent
        results.put(f"{type(error).__name__}: {error}")


@pytest.mark.parametrize("pair", range(5))
def test_two_seals_at_once_are_one_seal_and_one_no_op(repo: Path, pair: int) -> None:
    context, plan = multiprocessing.get_context("fork"), second_plan(repo)
    barrier, results = context.Barrier(2), context.Queue()
    workers = [context.Process(target=_seal, args=(barrier, str(repo), plan, results)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    outcomes = sorted(str(results.get(timeout=5)) for _ in workers)
    assert outcomes == ["0", "3"], outcomes  # one appended companions + plan, the other nothing
    assert len(verify_ledger(LEDGER).entries) == 6


def test_a_symlinked_rationale_is_refused_at_seal(repo: Path) -> None:
    plan = second_plan(repo)
    rationale = repo / plan / "rationale.md"
    (repo / "elsewhere.md").write_bytes(rationale.read_bytes())
    rationale.unlink()
    rationale.symlink_to(repo / "elsewhere.md")
    before = LEDGER.read_bytes()
    result = prereg("seal", plan, "--note", "linked")
    assert result.exit_code == 2
    assert "prereg/smollm2-135m/rationale.md: reached through the symlink" in result.stderr
    assert LEDGER.read_bytes() == before
