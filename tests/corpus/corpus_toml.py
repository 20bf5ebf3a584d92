"""A small TOML writer for the plan corpus: enough of TOML to write back a parsed plan with one value
changed (tables, arrays of tables, inline tables, strings, numbers, booleans, arrays).

Not a general TOML library: it writes what `tomllib` parsed from the capsule's own plans, and any
value the corpus swaps in (which may be of the wrong type on purpose).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def key(name: str) -> str:
    """A TOML key: bare when it can be, else a basic (JSON-escaped) string."""
    return name if _BARE.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def value(item: Any) -> str:
    """One inline TOML value."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        return str(item)
    if isinstance(item, float):
        if math.isnan(item):
            return "nan"
        if math.isinf(item):
            return "inf" if item > 0 else "-inf"
        return repr(item)
    if isinstance(item, str):
        return json.dumps(item, ensure_ascii=False)
    if isinstance(item, list):
        return "[" + ", ".join(value(v) for v in item) + "]"
    if isinstance(item, dict):
        return "{" + ", ".join(f"{key(k)} = {value(v)}" for k, v in item.items()) + "}"
    raise TypeError(f"no TOML form for {type(item).__name__}")


def _is_table(item: Any) -> bool:
    return isinstance(item, dict) and bool(item)


def _is_table_array(item: Any) -> bool:
    return isinstance(item, list) and bool(item) and all(isinstance(v, dict) for v in item)


def _table(data: dict[str, Any], path: list[str], lines: list[str]) -> None:
    for name, item in data.items():
        if not _is_table(item) and not _is_table_array(item):
            lines.append(f"{key(name)} = {value(item)}")
    for name, item in data.items():
        dotted = ".".join(key(p) for p in [*path, name])
        if _is_table(item):
            lines.append(f"\n[{dotted}]")
            _table(item, [*path, name], lines)
        elif _is_table_array(item):
            for entry in item:
                lines.append(f"\n[[{dotted}]]")
                _table(entry, [*path, name], lines)


def dumps(data: dict[str, Any]) -> str:
    """A TOML document for `data`."""
    lines: list[str] = []
    _table(data, [], lines)
    return "\n".join(lines).lstrip("\n") + "\n"
