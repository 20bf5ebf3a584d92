"""Atomic writes: an interrupted write leaves the old file (or nothing), never a partial one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capsule import atomic
from capsule.atomic import (
    append_jsonl_durable,
    copy_atomic,
    read_jsonl_complete,
    truncate_torn_tail,
    write_bytes_atomic,
)


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
