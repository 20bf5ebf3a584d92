"""What a corpus case may lay at a path besides bytes: a directory, a FIFO, a symbolic link, a sparse
file past the reader's size bound. `lay` puts one in place and `remove` takes whatever is there away
(never following a link), so the test can restore the workspace byte for byte."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Fifo:
    """A named pipe: a reader that opens it blocks until a writer comes (none ever does here)."""


@dataclass(frozen=True)
class Symlink:
    """A symbolic link to `target`; `{w}` in it stands for the workspace's root."""

    target: str


@dataclass(frozen=True)
class Device:
    """A character device node like /dev/null (made with mknod: root only), so a writer that would
    replace a device replaces this copy, never the machine's own /dev/null."""


@dataclass(frozen=True)
class Sparse:
    """A sparse file of `size` bytes (holes: no disk used), to cross a size bound cheaply."""

    size: int


FIFO = Fifo()
DEVICE = Device()
Special = Fifo | Symlink | Sparse | Device


def lay(path: Path, what: Special, root: Path) -> None:
    """Put `what` at `path` (whose parent exists and where nothing is)."""
    if isinstance(what, Fifo):
        os.mkfifo(path)
    elif isinstance(what, Device):
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # PermissionError unless root
    elif isinstance(what, Symlink):
        path.symlink_to(what.target.replace("{w}", str(root)))
    else:
        with open(path, "wb") as handle:
            handle.truncate(what.size)


def remove(path: Path) -> None:
    """Remove whatever is at `path`: a link or a special file itself (never its target), a folder
    with everything in it."""
    if path.is_symlink() or (os.path.lexists(path) and not path.is_dir()):
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
