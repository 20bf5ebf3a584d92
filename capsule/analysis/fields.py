"""Field helpers the schema dataclasses of analysis.json are declared with (`capsule.analysis.codec`
reads the metadata they set)."""

from __future__ import annotations

import dataclasses
from typing import Any

#: Field metadata: leave the key out of the JSON when the value is None.
OMIT_NONE: dict[str, bool] = {"omit_none": True}


def omittable(default: Any = None) -> Any:
    """A dataclass field that is absent from the JSON while None."""
    return dataclasses.field(default=default, metadata=OMIT_NONE)


def fields_of(value: Any) -> dict[str, Any]:
    """A dataclass instance's fields by name, one level deep (to build a subclass from it)."""
    return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
