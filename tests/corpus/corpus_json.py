"""Malformed JSON, generated: the ways a JSON document or JSON Lines row can break the strict reader.

Two families, both deterministic:
- `text_variants(text)`: the text itself broken (truncated, bad UTF-8, a BOM, comments, trailing
  commas, two values, bare NaN), whatever the loader's schema is;
- `field_variants(obj)`: one field's value replaced by something the reader must refuse whichever
  field it is (nesting past the bound, a number past the bound, NaN / Infinity, a lone surrogate, the
  field written twice), so these hold even for fields a loader ignores.
Each yields (label, bytes). The schema-aware variants (a wrong type in a field the loader checks)
live with each loader in `corpus_cases`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

#: Nesting depths past the reader's bound (64): just past it, Python's recursion limit, far past.
DEEP = (65, 1_500, 100_000)
#: Numbers past the bound (40 characters): as ints of these many digits, and floats out of range.
LONG_DIGITS = (41, 400, 5_000)
BAD_NUMBERS = ("1e999", "-1e999", "NaN", "Infinity", "-Infinity", "1." + "0" * 60, "-" + "7" * 41)

RAW = "\x00raw\x00"  # placeholder replaced by raw JSON text after dumping


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """The JSON text of `obj` as the capsule writes it (sorted keys, UTF-8)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, indent=indent)


def with_raw(obj: dict[str, Any], field: str, raw: str, *, indent: int | None = None) -> str:
    """`obj` as JSON text with `field`'s value replaced by the raw JSON text `raw`."""
    marked = dict(obj)
    marked[field] = RAW
    return dumps(marked, indent=indent).replace(json.dumps(RAW), raw, 1)


def nested(depth: int, inner: str = "1") -> str:
    """`inner` inside `depth` levels of alternating arrays and objects."""
    opening = "".join("[" if i % 2 == 0 else '{"a":' for i in range(depth))
    closing = "".join("]" if i % 2 == 0 else "}" for i in reversed(range(depth)))
    return opening + inner + closing


def field_variants(obj: dict[str, Any], *, indent: int | None = None) -> Iterator[tuple[str, bytes]]:
    """For each field of `obj`: values the strict reader refuses in any field."""
    for field in sorted(obj):
        for depth in DEEP:
            yield f"{field}: nested {depth} deep", with_raw(obj, field, nested(depth), indent=indent).encode()
        for digits in LONG_DIGITS:
            yield (
                f"{field}: {digits}-digit integer",
                with_raw(obj, field, "9" * digits, indent=indent).encode(),
            )
        for number in BAD_NUMBERS:
            yield f"{field}: number {number[:12]}", with_raw(obj, field, number, indent=indent).encode()
        yield f"{field}: lone surrogate", with_raw(obj, field, '"a\\ud800b"', indent=indent).encode()
        text = dumps(obj, indent=indent)
        first = text.index("{") + 1
        again = f"{json.dumps(field)}: {dumps(obj[field])}, "
        yield f"{field}: written twice", (text[:first] + again + text[first:]).encode()


def text_variants(text: str) -> Iterator[tuple[str, bytes]]:
    """The JSON text `text` (an object) broken in ways independent of its schema."""
    data = text.encode("utf-8")
    for fraction in (1, 4, 2, 3):
        cut = max(1, len(data) * fraction // 5)
        yield f"truncated at {fraction}/5", data[:cut]
    yield "last byte cut", data.rstrip(b"\n")[:-1]
    middle = len(data) // 2
    yield "invalid UTF-8 byte", data[:middle] + b"\xff" + data[middle:]
    yield "overlong UTF-8", data[:middle] + b"\xc0\xaf" + data[middle:]
    yield "UTF-16 encoded", text.encode("utf-16")
    yield "byte-order mark", b"\xef\xbb\xbf" + data
    yield "NUL byte inside", data[:middle] + b"\x00" + data[middle:]
    yield "trailing comma", text.rstrip().removesuffix("}").rstrip().encode() + b",}"
    yield "single quotes", text.replace('"', "'").encode()
    yield "comment", b"// a comment\n" + data if "\n" in text else b"/* c */" + data
    yield "two values", text.rstrip().encode() + b" " + text.rstrip().encode()
    yield "bare NaN", b"NaN"
    yield "unquoted key", text.replace('"', "", 2).encode()
    yield "nested 100000 deep", nested(100_000).encode()
    yield "array top nested 5000", ("[" * 5_000 + "]" * 5_000).encode()
    yield "a 5000-digit number", ("9" * 5_000).encode()
    yield "deep under a key with a bad escape", ('{"a\\q": ' + nested(100) + "}").encode()
    yield "long number under a key with a bad escape", ('{"a\\q": ' + "1" * 50 + "}").encode()
