"""Atomic writes: an interrupted write leaves the old file (or nothing), never a partial one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capsule import atomic
from capsule.atomic import (
    append_jsonl_durable,
    copy_atomic,
    truncate_torn_tail,
    write_bytes_atomic,
)
from capsule.errors import BadInputError
from capsule.jsonio import read_jsonl_complete


def test_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    write_bytes_atomic(target, b"first")
    write_bytes_atomic(target, b"second")
    assert target.read_bytes() == b"second"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_interrupted_write_keeps_old_content_and_leaves_no_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out.bin"
    write_bytes_atomic(target, b"old")

    def crash(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        write_bytes_atomic(target, b"new content that never lands")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


@pytest.mark.parametrize("hard_links", [True, False])
def test_a_new_file_is_written_once_and_never_over_one_that_appeared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hard_links: bool
) -> None:
    """`new=`: the file is created whole; one that exists by the time it would land (written by
    someone else since the caller looked) is kept, the error names the fix, and no temporary is left."""
    if not hard_links:  # a file system without hard links: checked, then renamed
        monkeypatch.setattr(atomic.os, "link", lambda *_a: (_ for _ in ()).throw(PermissionError(1, "no")))
    target = tmp_path / "COMPARISON.md"
    write_bytes_atomic(target, b"first", new="choose a new path")
    assert target.read_bytes() == b"first"
    with pytest.raises(BadInputError, match=r"COMPARISON.md: exists; choose a new path$"):
        write_bytes_atomic(target, b"second", new="choose a new path")
    assert target.read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["COMPARISON.md"]


def test_interrupted_copy_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "src"
    source.write_bytes(os.urandom(4096))
    target = tmp_path / "sub" / "dst"

    def crash(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(atomic.shutil, "copyfile", crash)
    with pytest.raises(OSError):
        copy_atomic(source, target)
    assert list(target.parent.iterdir()) == []


def test_jsonl_torn_tail_is_ignored_and_truncated(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    append_jsonl_durable(path, [{"key": 1}, {"key": 2}])
    with open(path, "a") as handle:
        handle.write('{"key": 3, "resp')
    assert read_jsonl_complete(path) == [{"key": 1}, {"key": 2}]
    assert truncate_torn_tail(path) == len('{"key": 3, "resp')
    append_jsonl_durable(path, [{"key": 3}])
    assert [row["key"] for row in read_jsonl_complete(path)] == [1, 2, 3]


# ---- issue 26, finding 4: the atomic writer never replaces a symlink or a special file ----------


def _special_targets(tmp_path: Path) -> dict[str, Path]:
    """A symlink to a regular file, a dangling symlink, a FIFO: what `--out` must refuse."""
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not yours")
    link, dangling, fifo = tmp_path / "link", tmp_path / "dangling", tmp_path / "fifo"
    link.symlink_to(outside)
    dangling.symlink_to(tmp_path / "nowhere")
    os.mkfifo(fifo)
    return {"symlink": link, "dangling symlink": dangling, "FIFO": fifo}


@pytest.mark.parametrize("kind", ["symlink", "dangling symlink", "FIFO"])
def test_a_special_target_is_refused_and_left_as_it_was(tmp_path: Path, kind: str) -> None:
    target = _special_targets(tmp_path)[kind]
    before = os.lstat(target)
    writes = (lambda: write_bytes_atomic(target, b"x"), lambda: copy_atomic(tmp_path / "outside.txt", target))
    for write in writes:
        with pytest.raises(BadInputError, match="symbolic link|not a regular file"):
            write()
        after = os.lstat(target)
        assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert (tmp_path / "outside.txt").read_bytes() == b"not yours"
    assert not list(tmp_path.glob(".*.part"))


def _device(tmp_path: Path) -> Path:
    """A character device node of our own (never the machine's /dev/full: were the fix to regress,
    a test run as root would replace it)."""
    import stat

    node = tmp_path / "full"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except PermissionError:
        pytest.skip("making a device node needs root (the case the finding is about)")
    return node


def test_a_device_target_is_refused(tmp_path: Path) -> None:
    """As root, a rename over a device replaces it with a regular file (`--out /dev/full` did)."""
    node = _device(tmp_path)
    with pytest.raises(BadInputError, match="not a regular file"):
        write_bytes_atomic(node, b"x")
    assert node.is_char_device()


@pytest.mark.parametrize("kind", ["symlink", "FIFO"])
def test_score_out_a_special_file_is_one_error_line(tmp_path: Path, kind: str) -> None:
    """`capsule score g.jsonl --out X` with X a symlink or a FIFO: exit 2, X unchanged (the scorer's
    own writer and the capsule's refuse it alike)."""
    from click.testing import CliRunner

    from capsule.cli import cli

    target = _special_targets(tmp_path)[kind]
    rows = tmp_path / "g.jsonl"
    rows.write_text('{"key": 1000, "response": "hi"}\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["score", str(rows), "--out", str(target)])
    assert result.exit_code == 2, result.output
    assert [line for line in result.stderr.splitlines() if line.startswith("Error:")], result.stderr
    assert os.path.islink(target) if kind == "symlink" else Path(target).is_fifo()
    device = _device(tmp_path)
    refused = CliRunner().invoke(cli, ["score", str(rows), "--out", str(device)])
    assert refused.exit_code == 2, refused.output
    assert device.is_char_device()
