"""The files the scorer writes: user-only directories and atomic, durable writes.

An interrupted write never leaves a file that looks complete (temporary file beside the target,
fsync, `os.replace`), and NLTK's data directories are user-only because NLTK trusts what it finds.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from ifeval_scorer.errors import ScorerInputError


def ensure_private_dir(path: Path) -> Path:
    """Create `path` and any missing parents as user-only directories; make an existing one user-only.

    A path that exists but is not a directory is a `ScorerInputError`.
    """
    if path.exists() and not path.is_dir():
        raise ScorerInputError(f"{path}: exists and is not a directory; choose another data directory")
    missing = [parent for parent in (path, *path.parents) if not parent.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(0o700)
    return path


def replace_problem(path: Path) -> str | None:
    """Why an atomic write must not replace `path` (None when it may): the path is a symbolic link,
    or exists and is not a regular file (a device such as /dev/full, a FIFO, a socket). A rename over
    such a path would replace the link or the special file itself, not write through it."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"cannot inspect it ({error.strerror or error})"
    if stat.S_ISLNK(mode):
        return "is a symbolic link; an output is never written through or over one: give a regular file path"
    if stat.S_ISDIR(mode):
        return "is a directory; give a file path to write"
    if not stat.S_ISREG(mode):
        return "exists and is not a regular file (a device, FIFO or socket); give a regular file path"
    return None


def check_output_path(path: Path) -> None:
    """Refuse, before any work, an output path that cannot be written: a directory, a symbolic link or
    special file (see `replace_problem`), a parent that is a file, or a nearest existing parent
    directory this user may not write into."""
    problem = replace_problem(path)
    if problem is not None:
        raise ScorerInputError(f"{path}: {problem}")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ScorerInputError(f"{path}: cannot write here, {parent} is a file; choose another path")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise ScorerInputError(
                    f"{path}: cannot write here, {parent} is not writable; choose another path"
                )
            return


def write_text_atomic(path: Path, text: str) -> None:
    """Write UTF-8 `text` to a user-only temporary file beside `path`, fsync it, rename it over `path`.

    Missing parent directories are created (with the default mode). A target that `replace_problem`
    refuses (a symbolic link, a device, a FIFO) is a `ScorerInputError`, and nothing is written.
    """
    problem = replace_problem(path)
    if problem is not None:
        raise ScorerInputError(f"{path}: {problem}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
