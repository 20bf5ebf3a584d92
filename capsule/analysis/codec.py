"""analysis.json <-> `capsule.analysis.schema.Analysis`: the one place the analysis touches JSON.

`write_analysis` writes an `Analysis` and `read_analysis` reads one back (one-line BadInputError when
the file is missing or does not fit the schema); every reader of analysis.json goes through them.
Underneath, `encode` turns a schema object into plain JSON values (a dataclass becomes an object
keyed by its field names) and `decode` builds the object back from them, checking that every
required key is there and no other. Values are never converted (an int stays an int where a float
is declared), so decoding a file and encoding it again gives the same JSON and, written by
`capsule.atomic.write_json_atomic`, the same bytes. A field whose metadata says `OMIT_NONE`
(`capsule.analysis.fields`) is left out of the JSON when it is None, and read as None when absent. A
control's section is decoded as the class its `kind` names (`control_schema.section_type`); another
union of dataclasses as the one member whose fields match the object's keys. A dataclass
with `TRANSPARENT = True` and a single field stands for that field's value (a mapping whose shape
another package owns).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from capsule.analysis.control_schema import ControlSection, section_type
from capsule.analysis.schema import SCHEMA, Analysis
from capsule.atomic import write_json_atomic
from capsule.errors import BadInputError
from capsule.jsonio import read_json_object


def write_analysis(path: Path, analysis: Analysis) -> None:
    """Write `analysis` as analysis.json (atomically, canonical bytes: the same analysis gives the same
    file, which is what a re-derivation compares)."""
    write_json_atomic(path, analysis_json(analysis))


def analysis_json(analysis: Analysis) -> dict[str, Any]:
    """The JSON-ready dict of analysis.json (what `write_analysis` writes)."""
    data: dict[str, Any] = encode(analysis)
    return data


def read_analysis(path: Path) -> Analysis:
    """A run's analysis.json as an `Analysis`; BadInputError (exit 2) naming the file when it is
    missing, of another schema, or does not fit this one."""
    if not path.exists():
        raise BadInputError(f"{path}: no {path.name}; run `capsule reproduce` for this run first")
    data = read_json_object(path, "analysis.json")
    if data.get("schema") != SCHEMA:
        raise BadInputError(
            f"{path}: field 'schema' is {data.get('schema')!r}, this capsule reads {SCHEMA!r}; "
            "re-derive it with `capsule reproduce`"
        )
    try:
        return analysis_from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise BadInputError(
            f"{path}: not an analysis this capsule writes ({type(error).__name__}: {error}); "
            "re-derive it with `capsule reproduce`"
        ) from None


def analysis_from_json(data: Mapping[str, Any]) -> Analysis:
    """The `Analysis` that analysis.json's dict encodes; BadInputError naming the first key that does
    not fit."""
    analysis: Analysis = decode(Analysis, data, "analysis.json")
    return analysis


def encode(value: Any) -> Any:
    """`value` as plain JSON values: dataclasses as objects, tuples as lists, the rest unchanged."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if getattr(value, "TRANSPARENT", False):
            return encode(getattr(value, dataclasses.fields(value)[0].name))
        out: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if item is None and field.metadata.get("omit_none"):
                continue
            out[field.name] = encode(item)
        return out
    if isinstance(value, Mapping):
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    return value


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _required(cls: type) -> set[str]:
    return {
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
        and not f.metadata.get("omit_none")
    }


def _matches(cls: Any, data: Any) -> bool:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and isinstance(data, Mapping)):
        return False
    if getattr(cls, "TRANSPARENT", False):
        return True
    names = {f.name for f in dataclasses.fields(cls)}
    return _required(cls) <= set(data) <= names


def _decode_dataclass(cls: Any, data: Any, where: str) -> Any:
    if getattr(cls, "TRANSPARENT", False):
        (only,) = dataclasses.fields(cls)
        return cls(decode(_hints(cls)[only.name], data, where))
    if not isinstance(data, Mapping):
        raise BadInputError(f"{where}: expected an object for {cls.__name__}, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise BadInputError(f"{where}: unknown key(s) {', '.join(unknown)} for {cls.__name__}")
    missing = sorted(_required(cls) - set(data))
    if missing:
        raise BadInputError(f"{where}: missing key(s) {', '.join(missing)} for {cls.__name__}")
    hints = _hints(cls)
    values = {name: decode(hints[name], data[name], f"{where}.{name}") for name in data}
    return cls(**values)


def decode(hint: Any, data: Any, where: str = "analysis") -> Any:
    """The value of type `hint` that `data` (plain JSON) encodes; BadInputError naming `where` when
    `data` does not fit the schema."""
    origin = get_origin(hint)
    if hint == ControlSection:  # a control's section: its class is the one its kind names
        return _decode_dataclass(section_type(data, where), data, where)
    if origin is Union or origin is types.UnionType:
        members = [arg for arg in get_args(hint) if arg is not type(None)]
        if data is None:
            return None
        classes = [arg for arg in members if isinstance(arg, type) and dataclasses.is_dataclass(arg)]
        if not classes:
            return decode(members[0], data, where) if len(members) == 1 else data
        found = [cls for cls in classes if _matches(cls, data)]
        if len(found) != 1:
            keys = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise BadInputError(f"{where}: {keys} matches {len(found)} of {[c.__name__ for c in classes]}")
        return _decode_dataclass(found[0], data, where)
    if origin is list:
        (item,) = get_args(hint)
        if not isinstance(data, list):
            raise BadInputError(f"{where}: expected a list, got {type(data).__name__}")
        return [decode(item, value, f"{where}[{i}]") for i, value in enumerate(data)]
    if origin is dict:
        _, item = get_args(hint)
        if not isinstance(data, Mapping):
            raise BadInputError(f"{where}: expected an object, got {type(data).__name__}")
        return {key: decode(item, value, f"{where}.{key}") for key, value in data.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _decode_dataclass(hint, data, where)
    return data
