"""The strict JSON parser under `ifeval_scorer.jsonl`: one JSON value from text, within bounds.

Nesting (`MAX_DEPTH`) and number length (`MAX_NUMBER_CHARS`) are checked by a scan of the text
before it is parsed (`check_bounds`); `NaN`, `Infinity`, a field repeated in one object and a lone
surrogate are refused while parsing. Every refusal is one `JsonInputError` naming the place and,
where there is one, the field. `ifeval_scorer.jsonl` (its module doc says why one reader) reads
files and lines with it and writes what it reads back.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from ifeval_scorer.errors import ScorerInputError

#: Deepest nesting accepted: the capsule's own files reach 8; Python's decoder recurses per level.
MAX_DEPTH = 64
#: Longest number accepted, in characters: a float's repr needs at most 24; keys and counts far fewer.
MAX_NUMBER_CHARS = 40
# A JSON string (and whether a `:` follows it, which makes it a key), a bracket, or a number. Strings
# are matched whole first, so brackets and digits inside them are never counted.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"(\s*:)?|[\[{]|[\]}]|-?[0-9][-+.0-9eE]*')
_LONG_NUMBERISH = re.compile("[-+.0-9eE]{" + str(MAX_NUMBER_CHARS + 1) + ",}")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
JSON_BLANK = " \t\r"  # the blanks JSON allows around a value (no \n: lines are split on it)

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


def parse_value(text: str, where: str, row: int | None) -> Any:
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
    return parse_value(text, where, None)


def loads_line(text: str, where: str, line: int) -> Any:
    """Parse one JSON Lines row already split off (line number `line` of the file `where`)."""
    return parse_value(text, where, line)
