"""Atomic and durable file writes: an interrupted write never leaves a file that looks valid."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError
from capsule.jsonio import dumps_document, dumps_line, torn_tail
from ifeval_scorer.files import replace_problem


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_output_dir(path: Path, what: str) -> None:
    """Refuse an output directory that is a symbolic link (dangling or not: an output is never
    written through one), an existing path that is not a directory, one under a regular file, or one
    that cannot be looked at (a name too long); BadInputError naming `what`."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as error:
        raise BadInputError(
            f"{path}: cannot be the {what} ({error.strerror or error}); choose another path"
        ) from None
    if os.path.islink(path):
        raise BadInputError(
            f"{path}: is a symbolic link; the {what} is never written through one: give a real directory"
        )
    if os.path.lexists(path) and not path.is_dir():
        raise BadInputError(f"{path}: exists and is not a directory; give a new path for the {what}")
    existing = next((parent for parent in path.parents if os.path.lexists(parent)), None)
    if existing is not None and not existing.is_dir():
        raise BadInputError(f"{path}: cannot make the {what} here, {existing} is a file; choose another path")


def make_directory(path: Path, what: str, mode: int = 0o777) -> None:
    """Create directory `path` and its missing parents; a place that cannot hold it (a parent that
    is a file, a directory not writable, `path` a symbolic link) is a BadInputError naming `what` it
    was for."""
    check_output_dir(path, what)
    try:
        path.mkdir(parents=True, exist_ok=True, mode=mode)
    except OSError as error:
        raise BadInputError(
            f"{path}: cannot make the {what} here ({error.strerror or error}); choose another path"
        ) from None


def _temporary_beside(path: Path) -> tuple[int, str]:
    """Create `path`'s missing parents and an empty temporary file beside it: (fd, its path). A
    target that is a directory, a symbolic link or a special file (a device, a FIFO) is refused: the
    rename would replace the link or the device itself (`ifeval_scorer.files.replace_problem`)."""
    problem = replace_problem(path)
    if problem is not None:
        raise BadInputError(f"{path}: {problem}")
    existing = next((parent for parent in path.parents if parent.exists()), None)
    if existing is not None and not existing.is_dir():
        raise BadInputError(f"{path}: cannot write here, {existing} is a file; choose another path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    except OSError as error:
        raise BadInputError(
            f"{path}: cannot write here ({error.strerror or error}); choose another path"
        ) from None


def write_bytes_atomic(path: Path, data: bytes, *, new: str | None = None) -> None:
    """Write `data` to a temporary file beside `path`, fsync it, then rename it over `path`.
    A place that cannot hold the file (a parent that is a file, a directory not writable, the path a
    directory, a symbolic link or a special file) is a BadInputError naming it, and nothing is written.
    With `new` (the fix to name), `path` must not exist: the file is linked into place, never over
    one that appeared meanwhile, and an existing `path` is a BadInputError ending with `new`."""
    fd, tmp = _temporary_beside(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if new is None:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # fails, changing nothing, where path exists
            except FileExistsError:
                raise BadInputError(f"{path}: exists; {new}") from None
            except OSError:  # a file system without hard links: checked, then renamed
                if os.path.lexists(path):
                    raise BadInputError(f"{path}: exists; {new}") from None
                os.replace(tmp, path)
            finally:
                Path(tmp).unlink(missing_ok=True)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_text_atomic(path: Path, text: str, *, new: str | None = None) -> None:
    """Atomically write UTF-8 text (with `new`, only as a new file: `write_bytes_atomic`)."""
    write_bytes_atomic(path, text.encode("utf-8"), new=new)


def write_json_atomic(path: Path, value: Any) -> None:
    """Atomically write indented, key-sorted JSON with a trailing newline (stable bytes for hashing),
    as `capsule.jsonio` writes it and reads it back."""
    write_text_atomic(path, dumps_document(value))


def copy_atomic(source: Path, destination: Path) -> None:
    """Copy a file so that `destination` either does not exist or holds all of `source`."""
    fd, tmp = _temporary_beside(destination)
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
    `capsule.jsonio.read_jsonl_complete`, which ignores a final line without its newline.
    """
    payload = "".join(dumps_line(row) for row in rows)
    if not payload:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())


def truncate_torn_tail(path: Path, what: str = "JSON Lines file") -> int:
    """Cut a final line without its newline (left by a crash) off a JSONL file; return bytes removed.
    The file is read by `capsule.jsonio.torn_tail`; this only cuts."""
    keep, torn = torn_tail(path, what)
    if torn:
        with open(path, "rb+") as handle:
            handle.truncate(keep)
            os.fsync(handle.fileno())
    return torn
