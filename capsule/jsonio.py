"""The capsule's JSON and JSON Lines input and output: `ifeval_scorer.jsonl`, with the capsule's errors.

The reader and writer themselves live in the scorer (`ifeval_scorer.jsonl`: why there, and what it
bounds, is said in its docstring), because the scorer may import nothing from the capsule while the
capsule may import the scorer. That module imports only the standard library, so this ground-layer
wrapper is as light as `json`. Here its `JsonInputError` becomes the capsule's `BadInputError` (exit 2)
or, for evidence that must verify (a ledger, a bundle), `VerificationError` (exit 3): callers pass
`error=`. Every module of the capsule that reads or writes JSON goes through this one, and so does
every input file of another format (a plan's TOML, a PEM key, a Markdown document): `read_input_bytes`
and `read_input_text` read a regular file only (a FIFO, a device such as /dev/zero, a socket is one
error line, never a hang), at most `MAX_INPUT_BYTES` of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError, CapsuleError
from ifeval_scorer.jsonl import (
    MAX_INPUT_BYTES,
    JsonInputError,
    TornTail,
    dumps_document,
    dumps_line,
    loads_document,
    loads_line,
    parse_lines,
)
from ifeval_scorer.jsonl import decode_text as _decode_text
from ifeval_scorer.jsonl import read_bytes as _read_bytes
from ifeval_scorer.jsonl import read_document as _read_document
from ifeval_scorer.jsonl import read_lines as _read_lines

__all__ = [
    "MAX_INPUT_BYTES",
    "dumps_document",
    "dumps_line",
    "parse_json",
    "parse_json_line",
    "parse_jsonl",
    "read_json",
    "read_json_object",
    "read_input_bytes",
    "read_input_text",
    "read_jsonl",
    "read_jsonl_complete",
    "read_jsonl_objects",
    "torn_tail",
]

ErrorType = type[CapsuleError]


def parse_json(text: str | bytes, where: str, *, error: ErrorType = BadInputError) -> Any:
    """One JSON document from text already read (a DSSE payload, say); `where` names it in errors."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return loads_document(text, where)
    except UnicodeDecodeError:
        raise error(f"{where}: not UTF-8 text") from None
    except JsonInputError as problem:
        raise error(str(problem)) from None


def parse_json_line(line: str | bytes, where: str, number: int, *, error: ErrorType = BadInputError) -> Any:
    """One JSON Lines row already split off: line `number` of the file `where`."""
    try:
        if isinstance(line, bytes):
            line = line.decode("utf-8")
        return loads_line(line, where, number)
    except UnicodeDecodeError:
        raise error(f"{where}:{number}: not UTF-8 text") from None
    except JsonInputError as problem:
        raise error(str(problem)) from None


def read_input_bytes(
    path: Path, what: str, *, error: ErrorType = BadInputError, limit: int = MAX_INPUT_BYTES
) -> bytes:
    """An input file's bytes (any format): a regular file of at most `limit` bytes, else `error`
    naming the file and `what` it should be ("plan", "public key")."""
    try:
        return _read_bytes(Path(path), what, limit=limit)
    except JsonInputError as problem:
        raise error(str(problem)) from None


def read_input_text(
    path: Path, what: str, *, error: ErrorType = BadInputError, limit: int = MAX_INPUT_BYTES
) -> str:
    """An input file as UTF-8 text, read as `read_input_bytes` reads it (a byte that is not UTF-8 is
    `error` naming the file and its line)."""
    data = read_input_bytes(path, what, error=error, limit=limit)
    try:
        return _decode_text(data, str(path), what)
    except JsonInputError as problem:
        raise error(str(problem)) from None


def read_json(path: Path, what: str, *, error: ErrorType = BadInputError) -> Any:
    """One JSON document from a file; `what` says what the file is ("manifest", "bundle.json")."""
    try:
        return _read_document(Path(path), what)
    except JsonInputError as problem:
        raise error(str(problem)) from None


def read_json_object(path: Path, what: str, *, error: ErrorType = BadInputError) -> dict[str, Any]:
    """A JSON document that must be an object (most of the capsule's files are)."""
    value = read_json(path, what, error=error)
    if not isinstance(value, Mapping):
        raise error(f"{path}: a {what} must be a JSON object, not {_kind(value)}")
    return dict(value)


def parse_jsonl(
    data: str | bytes, where: str, *, torn_tail: TornTail = "keep", error: ErrorType = BadInputError
) -> list[tuple[int, Any]]:
    """JSON Lines already read, as (line number, value) pairs (split on `\\n` only)."""
    try:
        return parse_lines(data, where, torn_tail=torn_tail)
    except JsonInputError as problem:
        raise error(str(problem)) from None


def read_jsonl(
    path: Path, what: str, *, torn_tail: TornTail = "keep", error: ErrorType = BadInputError
) -> list[tuple[int, Any]]:
    """A JSON Lines file as (line number, value) pairs; see `ifeval_scorer.jsonl.parse_lines`."""
    try:
        return _read_lines(Path(path), what, torn_tail=torn_tail)
    except JsonInputError as problem:
        raise error(str(problem)) from None


def read_jsonl_objects(
    path: Path, what: str, *, torn_tail: TornTail = "keep", error: ErrorType = BadInputError
) -> list[dict[str, Any]]:
    """A JSON Lines file whose every line must be an object, as a list of dicts."""
    rows = []
    for number, value in read_jsonl(path, what, torn_tail=torn_tail, error=error):
        if not isinstance(value, Mapping):
            raise error(f"{path}:{number}: each line of a {what} must be a JSON object, not {_kind(value)}")
        rows.append(dict(value))
    return rows


def read_jsonl_complete(path: Path, what: str = "JSON Lines file") -> list[dict[str, Any]]:
    """The complete lines of a file the capsule appends whole lines to
    (`capsule.atomic.append_jsonl_durable`): a torn last line (a crash mid-append) is dropped,
    every line must be an object, and a missing file reads as no rows."""
    if not Path(path).exists():
        return []
    return read_jsonl_objects(path, what, torn_tail="drop")


def torn_tail(path: Path, what: str = "JSON Lines file") -> tuple[int, int]:
    """A file the capsule appends whole lines to, split at its last newline: (bytes of whole lines,
    bytes of a final line without its newline, torn by a crash mid-append). (0, 0) for a missing
    file; read as every input file is (`read_input_bytes`)."""
    if not Path(path).exists():
        return 0, 0
    data = read_input_bytes(path, what)
    whole = data.rfind(b"\n") + 1
    return whole, len(data) - whole


def _kind(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
