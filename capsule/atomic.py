"""Atomic and durable file writes: an interrupted write never leaves a file that looks valid."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file beside `path`, fsync it, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_text_atomic(path: Path, text: str) -> None:
    """Atomically write UTF-8 text."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, value: Any) -> None:
    """Atomically write indented, key-sorted JSON with a trailing newline (stable bytes for hashing)."""
    write_text_atomic(path, json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def copy_atomic(source: Path, destination: Path) -> None:
    """Copy a file so that `destination` either does not exist or holds all of `source`."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".part", dir=destination.parent)
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, destination)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_jsonl_durable(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Append rows as JSON lines in one write, then fsync: a crash leaves whole lines or none of them.

    A torn final line can still appear if the machine dies mid-write; readers of such files use
    `read_jsonl_complete`, which ignores a final line without its newline.
    """
    payload = "".join(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in rows)
    if not payload:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())


def read_jsonl_complete(path: Path) -> list[dict[str, Any]]:
    """Read the complete JSON lines of a file written by `append_jsonl_durable` (a torn tail is dropped)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    complete = lines[:-1]  # the last element is "" after a final newline, or a torn fragment
    return [json.loads(line) for line in complete if line.strip()]


def truncate_torn_tail(path: Path) -> int:
    """Cut a final line without its newline (left by a crash) off a JSONL file; return bytes removed."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data.rfind(b"\n") + 1
    with open(path, "rb+") as handle:
        handle.truncate(keep)
        os.fsync(handle.fileno())
    return len(data) - keep
