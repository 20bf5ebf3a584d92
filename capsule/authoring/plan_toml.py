"""Write a `Plan` as plan.toml text: the loader's inverse, key for key.

Each table's keys are the ones the loader checks (`capsule.prereg.loader`'s `*_KEYS`,
`capsule.prereg.arms.ARM_KEYS`, a control kind's row in `capsule.prereg.control_kinds`), taken in the
dataclass's field order, so the key set is written once and a new key reaches the writer by itself.
Required keys are always written; optional ones (bookkeeping, amendments) only when set. Loading
what `plan_toml` writes gives the same plan back (`tests/unit/test_plan_toml.py` checks it).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

from capsule.prereg.arms import ARM_KEYS, DECODING_KEYS
from capsule.prereg.control_kinds import control_kind
from capsule.prereg.loader import (
    CLAIM_KEYS,
    COMPARISON_KEYS,
    HUB_KEYS,
    MODEL_KEYS,
    PLAN_KEYS,
    PROMPTS_KEYS,
    SUBSET_KEYS,
    VERDICT_KEYS,
)
from capsule.prereg.plan import (
    Arm,
    Claim,
    Comparison,
    Control,
    Decoding,
    Model,
    Plan,
    PromptSet,
    Subset,
    VerdictRule,
)

Keys = tuple[tuple[str, ...], tuple[str, ...]]  # (required, optional)
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_INLINE_FIELDS = ("backend_options", "env")  # small maps written on the arm's line, as hand-written plans do


class _Inline(dict[str, Any]):
    """A table written inline (`{ a = 1 }`) rather than under its own header."""


def _keys(obj: Any) -> Keys:
    """The (required, optional) keys of the table `obj` becomes, as the loader reads that table."""
    if isinstance(obj, Plan):
        return PLAN_KEYS
    if isinstance(obj, Model):
        return (MODEL_KEYS[0] + HUB_KEYS, ()) if obj.source == "hub" else MODEL_KEYS
    if isinstance(obj, Subset):
        return SUBSET_KEYS[obj.rule], ()
    if isinstance(obj, Control):
        kind = control_kind(obj.kind)
        return kind.keys, kind.optional
    tables: dict[type, Keys] = {
        Claim: CLAIM_KEYS,
        PromptSet: PROMPTS_KEYS,
        Arm: ARM_KEYS,
        Decoding: DECODING_KEYS,
        Comparison: COMPARISON_KEYS,
        VerdictRule: VERDICT_KEYS,
    }
    return tables[type(obj)]


def _is_unset(value: Any) -> bool:
    return value in ("", (), [], {}) or (not isinstance(value, bool) and value == 0)


def _plain(value: Any, field: str = "") -> Any:
    """A dataclass, tuple or dict turned into the TOML data the loader would read."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return table_of(value)
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        plain = {str(key): _plain(item) for key, item in value.items()}
        return _Inline(plain) if field in _INLINE_FIELDS else plain
    return value


def table_of(obj: Any) -> dict[str, Any]:
    """The TOML table of one plan dataclass: its loader keys in field order, unset optional keys left out."""
    required, optional = _keys(obj)
    table: dict[str, Any] = {}
    for field in dataclasses.fields(obj):
        if field.name not in required and field.name not in optional:
            continue
        value = getattr(obj, field.name)
        if field.name in optional and _is_unset(value):
            continue
        table[field.name] = _plain(value, field.name)
    if isinstance(obj, Plan) and obj.signers:  # the field `signers` is read from the table [evidence]
        table["evidence"] = {"signers": list(obj.signers)}
    return table


def _string(text: str) -> str:
    escapes = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _value(value: Any) -> str:
    """One TOML value: string, boolean, integer, float, array or inline table."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"a plan holds no {value} (only finite numbers)")
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return (
            "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }" if value else "{}"
        )
    raise TypeError(f"no TOML form for {value!r}")


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping) and not isinstance(value, _Inline)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_table(item) for item in value)


def _lines(table: Mapping[str, Any], path: tuple[str, ...]) -> list[str]:
    """The body of `table` (scalars first, then sub-tables and arrays of tables, in order)."""
    lines = [
        f"{_key(k)} = {_value(v)}" for k, v in table.items() if not _is_table(v) and not _is_table_array(v)
    ]
    for key, value in table.items():
        header = ".".join(_key(part) for part in (*path, key))
        if _is_table(value):
            body = _lines(value, (*path, key))
            # a table holding only sub-tables needs no header of its own (TOML defines it implicitly)
            lines += body if body and body[0] == "" else ["", f"[{header}]", *body]
        elif _is_table_array(value):
            for item in value:
                lines += ["", f"[[{header}]]", *_lines(item, (*path, key))]
    return lines


def plan_toml(plan: Plan, header: str = "") -> str:
    """The plan.toml text of `plan`, after `header` (comment lines, each starting with '#')."""
    body = "\n".join(_lines(table_of(plan), ())).strip("\n")
    return (header.rstrip("\n") + "\n\n" if header else "") + body + "\n"
