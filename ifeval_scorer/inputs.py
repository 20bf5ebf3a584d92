"""Responses to score: validated rows of (key, response), from memory or a generations JSONL file.

A row names its prompt by `key`; a row without `key` but with the exact `prompt` text (as in Google's
published response files) is matched to its key through the prompt file. Every problem is reported
as one `ScorerInputError` naming where (file and line, or row number) and which key, before any
scoring or writing happens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ifeval_scorer.errors import ScorerInputError
from ifeval_scorer.jsonl import read_lines
from ifeval_scorer.prompts import Prompt

# A key written as a string: ASCII digits only (str.isdigit() also takes full-width and Arabic-Indic
# digits, which int() converts), and few enough of them to convert quickly.
_KEY_TEXT = re.compile(r"[0-9]{1,18}")


@dataclass(frozen=True)
class Response:
    """One response to score: the prompt key and the text."""

    key: int
    response: str


def _key_of(row: Mapping[str, Any], by_text: Mapping[str, int], where: str) -> int:
    if "key" in row:
        key = row["key"]
        if isinstance(key, str):
            if _KEY_TEXT.fullmatch(key.strip(" ")):
                return int(key)
            raise ScorerInputError(f"{where}: key {key!r} is not an integer (ASCII digits 0-9 only)")
        if isinstance(key, bool) or not isinstance(key, int):
            raise ScorerInputError(f"{where}: key {key!r} is not an integer")
        return key
    if isinstance(row.get("prompt"), str):
        if row["prompt"] not in by_text:
            raise ScorerInputError(f"{where}: no `key`, and its `prompt` text is not in the prompt file")
        return by_text[row["prompt"]]
    raise ScorerInputError(f"{where}: missing `key` (each row needs `key` and `response`)")


def validate_rows(
    rows: Iterable[tuple[str, Any]], prompts: Mapping[int, Prompt]
) -> list[Response]:
    """Check (where, row) pairs: a JSON object, a known, unique key, and a string response."""
    by_text = {prompt.prompt: key for key, prompt in prompts.items()}
    seen: dict[int, str] = {}
    result: list[Response] = []
    for where, row in rows:
        if not isinstance(row, Mapping):
            raise ScorerInputError(f"{where}: expected a JSON object with `key` and `response`")
        key = _key_of(row, by_text, where)
        if key not in prompts:
            raise ScorerInputError(f"{where}: key {key} is not in the IFEval prompt file")
        if key in seen:
            raise ScorerInputError(f"{where}: duplicate key {key} (first at {seen[key]})")
        seen[key] = where
        response = row.get("response")
        if not isinstance(response, str):
            kind = "missing" if "response" not in row else f"a {type(response).__name__}, not a string"
            raise ScorerInputError(f"{where}: key {key}: `response` is {kind}")
        result.append(Response(key, response))
    return result


def rows_in_memory(rows: Iterable[Mapping[str, Any]]) -> Iterable[tuple[str, Any]]:
    """Label in-memory rows `row N` (1-based) for error messages."""
    return ((f"row {number}", row) for number, row in enumerate(rows, start=1))


def rows_in_file(path: Path) -> list[tuple[str, Any]]:
    """Read a JSONL file into (`path:line`, row) pairs with the strict reader (`ifeval_scorer.jsonl`:
    split on `\\n` only, bounded depth and numbers, no repeated field); blank lines are skipped."""
    return [(f"{path}:{number}", row) for number, row in read_lines(path, "generations file")]


def read_generations(path: Path, prompts: Mapping[int, Prompt]) -> list[Response]:
    """Read and validate a generations JSONL file (rows with `key` and `response`); a file without
    a single row is an error (scoring nothing would print metrics of nothing)."""
    rows = rows_in_file(path)
    if not rows:
        raise ScorerInputError(f"{path}: the generations file holds no rows; give a file with one row a line")
    return validate_rows(rows, prompts)
