"""Output identity between two arms: byte-identical counts and the token index where outputs first part.

Determinism is measured, not assumed: two arms that should agree (a rerun, another batch size,
another backend) are compared prompt by prompt on their common keys. Where outputs differ, the
index of the first differing token says how early the numerics diverged (a late divergence is
usually one near-tie flipped by a different reduction order).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from capsule.analysis.control_schema import Divergence, Identity

Tokenize = Callable[[str], list[int]]


def char_codes(text: str) -> list[int]:
    """The default tokenizer: one "token" per Unicode character (its code point).

    Deterministic and dependency-free; callers with the model at hand pass its tokenizer's
    `encode` instead so indices are in model tokens.
    """
    return [ord(ch) for ch in text]


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first position where `a` and `b` differ (the shorter length when one is a
    prefix of the other); None when they are equal."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def rows_by_key(rows: Sequence[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """Generation rows keyed by integer prompt key."""
    return {int(row["key"]): row for row in rows}


def _tokens(
    row_a: Mapping[str, Any], row_b: Mapping[str, Any], tokenize: Tokenize
) -> tuple[list[int], list[int], bool]:
    ids_a, ids_b = row_a.get("output_ids"), row_b.get("output_ids")
    if ids_a is not None and ids_b is not None:
        return list(ids_a), list(ids_b), True
    return tokenize(str(row_a.get("raw", ""))), tokenize(str(row_b.get("raw", ""))), False


def distribution(values: Sequence[int], unit: str | None = None) -> Divergence:
    """Count, min, median, max and the sorted values (for plots) of first-divergence indices."""
    ordered = sorted(values)
    if not ordered:
        return Divergence(n=0, min=None, median=None, max=None, indices=[], unit=unit)
    median = statistics.median(ordered)
    return Divergence(
        n=len(ordered),
        min=ordered[0],
        median=int(median) if float(median).is_integer() else float(median),
        max=ordered[-1],
        indices=ordered,
        unit=unit,
    )


def identity_contrast(
    rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]], tokenize: Tokenize | None = None
) -> Identity:
    """Compare two arms' generations on their common keys.

    Returns n_common, the keys only one arm has (a partial arm), byte-identical counts of the full
    output (`raw`) and of the scored `response`, the keys whose input ids differ (which breaks the
    premise of every contrast), and the distribution of first-divergence indices over the
    non-identical outputs, with the unit it is counted in: model `output_ids` when both rows carry
    them, else the given tokenizer on `raw`, else characters.
    """
    by_a, by_b = rows_by_key(rows_a), rows_by_key(rows_b)
    common = sorted(set(by_a) & set(by_b))
    fallback = tokenize or char_codes
    indices: list[int] = []
    units: set[str] = set()
    identical_raw = identical_response = 0
    input_mismatch: list[int] = []
    for key in common:
        row_a, row_b = by_a[key], by_b[key]
        if row_a.get("input_ids_sha256") != row_b.get("input_ids_sha256"):
            input_mismatch.append(key)
        identical_response += row_a.get("response") == row_b.get("response")
        tokens_a, tokens_b, from_ids = _tokens(row_a, row_b, fallback)
        if from_ids:
            same = tokens_a == tokens_b and row_a.get("raw") == row_b.get("raw")
        else:
            same = row_a.get("raw") == row_b.get("raw")
        if same:
            identical_raw += 1
            continue
        units.add("output_ids" if from_ids else ("tokenize" if tokenize else "characters"))
        index = first_divergence(tokens_a, tokens_b)
        indices.append(len(tokens_a) if index is None else index)  # equal tokens, different text
    return Identity(
        n_common=len(common),
        only_in_a=len(set(by_a) - set(by_b)),
        only_in_b=len(set(by_b) - set(by_a)),
        identical=identical_raw,
        identical_response=identical_response,
        input_ids_mismatch=input_mismatch,
        first_divergence=distribution(indices, "+".join(sorted(units)) or None),
    )
