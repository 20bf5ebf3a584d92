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
import math
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from ifeval_scorer.errors import ScorerInputError

__all__ = [
    "MAX_DEPTH",
    "MAX_INPUT_BYTES",
    "MAX_NUMBER_CHARS",
    "JsonInputError",
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

#: Deepest nesting accepted: the capsule's own files reach 8; Python's decoder recurses per level.
MAX_DEPTH = 64
#: Longest number accepted, in characters: a float's repr needs at most 24; keys and counts far fewer.
MAX_NUMBER_CHARS = 40
#: Largest input file read, in bytes. The largest the capsule makes or takes is a harness's samples
#: file or a generations file of 541 long responses (tens of MB); parsed JSON takes about ten times
#: its size in memory, so 256 MiB keeps a mistaken input (a disk image, /dev/zero) a one-line error.
MAX_INPUT_BYTES = 256 * 1024 * 1024

# A JSON string (and whether a `:` follows it, which makes it a key), a bracket, or a number. Strings
# are matched whole first, so brackets and digits inside them are never counted.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"(\s*:)?|[\[{]|[\]}]|-?[0-9][-+.0-9eE]*')
_LONG_NUMBERISH = re.compile("[-+.0-9eE]{" + str(MAX_NUMBER_CHARS + 1) + ",}")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_JSON_BLANK = " \t\r"

TornTail = Literal["error", "drop", "keep"]


class JsonInputError(ScorerInputError):
    """A JSON or JSONL input is unreadable or breaks a bound; `where` is `file:line`, `field` if known."""

    def __init__(self, where: str, problem: str, field: str | None = None) -> None:
        self.where, self.problem, self.field = where, problem, field
        about = f" (field {field!r})" if field else ""
        super().__init__(f"{where}: {problem}{about}")


class _Refused(ValueError):
    """Raised inside the decoder's hooks; turned into a JsonInputError with the place attached."""

    def __init__(self, problem: str, field: str | None = None) -> None:
        super().__init__(problem)
        self.problem, self.field = problem, field


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _key_name(token: str) -> str:
    try:
        return str(json.loads(token))
    except ValueError:  # a malformed key (a bad escape): name it as written
        return token[1:-1]


def _field_path(keys: list[str | None]) -> str | None:
    return ".".join(_key_name(key) for key in keys if key is not None) or None


def check_bounds(text: str) -> tuple[int, str, str | None] | None:
    """The first bound `text` breaks, as (line, problem, field), or None: nesting deeper than
    `MAX_DEPTH`, or a number longer than `MAX_NUMBER_CHARS`. Scans without recursion, and skips the
    scan when a quick count shows no bound can be broken (the usual case)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH and not _LONG_NUMBERISH.search(text):
        return None
    keys: list[str | None] = [None]
    for match in _TOKEN.finditer(text):
        token = match.group()
        first = token[0]
        if first == '"':
            if match.group(1):
                keys[-1] = token[: token.rindex('"') + 1]
        elif first in "[{":
            keys.append(None)
            if len(keys) - 1 > MAX_DEPTH:
                where = _line_of(text, match.start())
                return where, f"nested deeper than {MAX_DEPTH} levels", _field_path(keys)
        elif first in "]}":
            if len(keys) > 1:
                keys.pop()
        elif len(token) > MAX_NUMBER_CHARS:
            problem = f"a number of {len(token)} characters (at most {MAX_NUMBER_CHARS})"
            return _line_of(text, match.start()), problem, _field_path(keys)
    return None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Refused("a field appears twice in one object", key)
        result[key] = value
    return result


def _integer(token: str) -> int:
    if len(token) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number of {len(token)} characters (at most {MAX_NUMBER_CHARS})")
    return int(token)


def _float(token: str) -> float:
    value = float(token) if len(token) <= MAX_NUMBER_CHARS else math.inf
    if not math.isfinite(value):
        raise _Refused(f"the number {token[:MAX_NUMBER_CHARS]} is out of range")
    return value


def _constant(token: str) -> Any:
    raise _Refused(f"{token} is not JSON (write null or a finite number)")


def _strings(value: Any) -> Iterator[str]:
    """Every string in a parsed value (keys too); iterative, though depth is already bounded."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _has_lone_surrogate(value: Any) -> bool:
    for text in _strings(value):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
    return False


def _parse(text: str, where: str, row: int | None) -> Any:
    """Parse one JSON value under the bounds; `where` names the file, `row` the JSONL line (None: a
    whole document, whose lines are counted inside `text`)."""

    def place(line: int | None) -> str:
        if row is not None:
            return f"{where}:{row}"
        return where if line is None else f"{where}:{line}"

    broken = check_bounds(text)
    if broken is not None:
        line, problem, field = broken
        raise JsonInputError(place(line), problem, field)
    try:
        value = json.loads(
            text,
            object_pairs_hook=_object,
            parse_int=_integer,
            parse_float=_float,
            parse_constant=_constant,
        )
    except json.JSONDecodeError as error:
        raise JsonInputError(
            place(error.lineno), f"not valid JSON ({error.msg} at column {error.colno})"
        ) from None
    except _Refused as error:
        raise JsonInputError(place(None), error.problem, error.field) from None
    except RecursionError:  # a belt: check_bounds already refuses deep nesting
        raise JsonInputError(place(None), f"nested deeper than {MAX_DEPTH} levels") from None
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
        raise JsonInputError(place(None), "a string holds a lone surrogate escape (not UTF-8 text)")
    return value


def loads_document(text: str, where: str) -> Any:
    """Parse the text of one JSON document (any value) under the bounds; errors name `where:line`."""
    return _parse(text, where, None)


def loads_line(text: str, where: str, line: int) -> Any:
    """Parse one JSON Lines row already split off (line number `line` of the file `where`)."""
    return _parse(text, where, line)


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
    if lines[-1].strip(_JSON_BLANK):
        if torn_tail == "drop":
            lines.pop()
        elif torn_tail == "error":
            raise JsonInputError(
                f"{where}:{last}",
                "the last line has no newline (torn or edited); only whole lines are appended",
            )
    pairs = []
    for number, line in enumerate(lines, start=1):
        if line.strip(_JSON_BLANK):
            pairs.append((number, _parse(line, where, number)))
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
