"""Strict JSON and JSON Lines: the one reader and the one writer of every JSON file the code base reads.

Why one reader, and why it is strict:
- lines are split on `\\n` only. `str.splitlines()` also splits on U+2028, U+2029, U+0085 and other
  separators, which a model's response may hold and which the writer leaves raw (`ensure_ascii=False`);
- nesting is bounded (`MAX_DEPTH`) by a scan of the text *before* it is parsed, so a line of ten
  thousand `[` is a one-line error, not a `RecursionError`;
- a number longer than `MAX_NUMBER_CHARS` is refused before it is converted (Python's `int()` raises
  on 4,300 digits and is quadratic below that), and so are `NaN` and `Infinity` (not JSON);
- a field repeated in one object is refused (the standard decoder keeps the last value silently);
- a string holding a lone surrogate (`"\\ud800"`) is refused: it cannot be written back as UTF-8;
- every error is one `JsonInputError` naming the file, the line and, where there is one, the field.

The writer (`dumps_line`, `dumps_document`) writes sorted keys, UTF-8 text and no `NaN`, and checks
the same bounds, so whatever it writes this reader reads back unchanged.

Where it lives, and why: the scorer imports nothing from the capsule, and the capsule may import the
scorer, so the reader sits here and imports only the standard library and `ifeval_scorer.errors`
(`ifeval_scorer/__init__` loads its heavy modules lazily, so importing this module costs nothing
else). The capsule's ground layer (`capsule.jsonio`) wraps it and turns its errors into the
capsule's own `BadInputError` or `VerificationError`; no other module of either package parses JSON.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, Literal

from ifeval_scorer.strict_json import (
    JSON_BLANK,
    MAX_DEPTH,
    MAX_NUMBER_CHARS,
    JsonInputError,
    check_bounds,
    loads_document,
    loads_line,
    parse_value,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_INPUT_BYTES",
    "MAX_NUMBER_CHARS",
    "JsonInputError",
    "TornTail",
    "dumps_document",
    "dumps_line",
    "loads_document",
    "loads_line",
    "parse_lines",
    "decode_text",
    "read_bytes",
    "read_document",
    "read_lines",
    "read_text",
]

#: Largest input file read, in bytes. The largest the capsule makes or takes is a harness's samples
#: file or a generations file of 541 long responses (tens of MB); parsed JSON takes about ten times
#: its size in memory, so 256 MiB keeps a mistaken input (a disk image, /dev/zero) a one-line error.
MAX_INPUT_BYTES = 256 * 1024 * 1024

TornTail = Literal["error", "drop", "keep"]


def read_bytes(path: Path, what: str, *, limit: int = MAX_INPUT_BYTES) -> bytes:
    """A file's bytes: the one way an input file is read. A missing file, a directory, an unreadable
    one, one that is not a regular file (a FIFO would block, a device such as /dev/zero never ends)
    or one over `limit` bytes is one JsonInputError naming `what` the file should be (for example
    "generations file"). The file is opened without blocking and checked on the open descriptor, so
    what is checked is what is read."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise JsonInputError(str(path), f"{what} not found") from None
    except IsADirectoryError:
        raise JsonInputError(str(path), f"is a directory, not a {what}") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise JsonInputError(str(path), f"is a loop of symbolic links; give the {what} itself") from None
        raise JsonInputError(str(path), f"cannot read the {what} ({error.strerror or error})") from None
    info = os.fstat(descriptor)
    problem = None
    if stat.S_ISDIR(info.st_mode):
        problem = f"is a directory, not a {what}"
    elif not stat.S_ISREG(info.st_mode):
        problem = f"is not a regular file (a FIFO, a device or a socket); give the {what} itself"
    elif info.st_size > limit:
        problem = f"{info.st_size} bytes, more than a {what} may hold ({limit})"
    if problem is not None:
        os.close(descriptor)
        raise JsonInputError(str(path), problem)
    with os.fdopen(descriptor, "rb") as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as error:
            raise JsonInputError(str(path), f"cannot read the {what} ({error.strerror or error})") from None
    if len(data) > limit:
        raise JsonInputError(str(path), f"grew past {limit} bytes while read; a {what} may hold no more")
    return data


def decode_text(data: bytes, where: str, what: str) -> str:
    """Bytes as UTF-8 text; an undecodable byte is one JsonInputError naming `where:line`."""
    return _text(data, where, what)


def read_text(path: Path, what: str, *, limit: int = MAX_INPUT_BYTES) -> str:
    """A UTF-8 text input file (a plan, a Markdown document), read as `read_bytes` reads it."""
    return _text(read_bytes(path, what, limit=limit), str(path), what)


def _text(data: bytes, where: str, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise JsonInputError(f"{where}:{line}", f"the {what} is not UTF-8 text") from None


def read_document(path: Path, what: str) -> Any:
    """Read one JSON document from a file (bundle.json, a manifest, a DSSE envelope, ...)."""
    return loads_document(_text(read_bytes(path, what), str(path), what), str(path))


def parse_lines(data: str | bytes, where: str, *, torn_tail: TornTail = "keep") -> list[tuple[int, Any]]:
    """Parse JSON Lines into (line number, value) pairs, splitting on `\\n` only; blank lines skipped.

    `torn_tail` says what a last line without its newline is: "keep" (a file a person wrote),
    "drop" (a file appended whole lines at a time, where such a line is the trace of a crash), or
    "error" (such a file whose every line must be whole, like the ledger).
    """
    text = data if isinstance(data, str) else _text(data, where, "JSON Lines file")
    lines = text.split("\n")
    last = len(lines)
    if lines[-1].strip(JSON_BLANK):
        if torn_tail == "drop":
            lines.pop()
        elif torn_tail == "error":
            raise JsonInputError(
                f"{where}:{last}",
                "the last line has no newline (torn or edited); only whole lines are appended",
            )
    pairs = []
    for number, line in enumerate(lines, start=1):
        if line.strip(JSON_BLANK):
            pairs.append((number, parse_value(line, where, number)))
    return pairs


def read_lines(path: Path, what: str, *, torn_tail: TornTail = "keep") -> list[tuple[int, Any]]:
    """Read a JSON Lines file into (line number, value) pairs (see `parse_lines`)."""
    data = read_bytes(path, what)
    return parse_lines(_text(data, str(path), what), str(path), torn_tail=torn_tail)


def _dumps(value: Any, indent: int | None, separators: tuple[str, str] | None = None) -> str:
    try:
        text = json.dumps(
            value, sort_keys=True, ensure_ascii=False, allow_nan=False, indent=indent, separators=separators
        )
    except ValueError as error:  # NaN or Infinity, or a circular value: a bug in the caller's data
        raise ValueError(f"cannot write as strict JSON: {error}") from error
    broken = check_bounds(text)
    if broken is not None:
        raise ValueError(f"cannot write as strict JSON: {broken[1]} (field {broken[2]!r})")
    return text


def dumps_line(value: Any, *, compact: bool = False) -> str:
    """One JSON Lines row: sorted keys, UTF-8 text, no newline inside, one `\\n` after it. `compact`
    drops the spaces after `,` and `:` (the canonical form score files and the ledger use)."""
    return _dumps(value, None, (",", ":") if compact else None) + "\n"


def dumps_document(value: Any) -> str:
    """One indented JSON document with sorted keys and a final newline (stable bytes for hashing)."""
    return _dumps(value, 2) + "\n"
