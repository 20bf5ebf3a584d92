"""Batch formation and execution order, and per-request seeds: all derived, none stored ad hoc.

Batches are formed in a declared order ("file": the subset's key order; "length": by prompt token
count, which wastes less padding) into chunks of exactly `batch_size` keys (the last holds the
remainder). They are then *executed* in a seeded random order, so an arm stopped by a cost cap is
an unbiased sample of batches rather than the shortest prompts. Everything here is a pure function
of (keys, prompt lengths, arm settings), so a resumed arm re-forms exactly the same batches.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from capsule.errors import BadInputError
from capsule.hashing import sha256_json

_SEED_BITS = 63  # per-request seeds fit a signed 64-bit int (torch.Generator, vLLM SamplingParams.seed)


@dataclass(frozen=True)
class Batch:
    """One formed batch: its index in formation order and its keys, in row order."""

    index: int
    keys: tuple[int, ...]

    @property
    def keys_sha256(self) -> str:
        """sha256 of the key list: recorded per row to name the row's neighbours."""
        return batch_keys_sha256(self.keys)


def batch_keys_sha256(keys: Sequence[int]) -> str:
    """sha256 of the canonical JSON of a batch's key list."""
    return sha256_json([int(k) for k in keys])


def form_batches(keys: Sequence[int], lengths: dict[int, int], batch_size: int, order: str) -> list[Batch]:
    """Chunk `keys` into batches of `batch_size` in the declared `order` ("file" or "length").

    "length" sorts by (prompt token count, position in `keys`), a stable, fully determined order.
    """
    if batch_size < 1:
        raise BadInputError(f"batch_size must be at least 1, not {batch_size}")
    if len(set(keys)) != len(keys):
        raise BadInputError("duplicate prompt keys in the arm's subset")
    if order == "file":
        ordered = list(keys)
    elif order == "length":
        position = {key: i for i, key in enumerate(keys)}
        ordered = sorted(keys, key=lambda k: (lengths[k], position[k]))
    else:
        raise BadInputError(f"batch_order must be 'file' or 'length', not {order!r}")
    return [
        Batch(index=i, keys=tuple(ordered[start : start + batch_size]))
        for i, start in enumerate(range(0, len(ordered), batch_size))
    ]


def execution_order(n_batches: int, seed: int) -> list[int]:
    """A seeded permutation of batch indices: the order in which batches run (and caps cut)."""
    order = list(range(n_batches))
    random.Random(derive_seed("batch-order", seed)).shuffle(order)
    return order


def derive_seed(purpose: str, *values: int) -> int:
    """A 63-bit seed from a purpose label and integers, through sha256 (stable across platforms)."""
    digest = sha256_json([purpose, *[int(v) for v in values]])
    return int(digest[:16], 16) >> (64 - _SEED_BITS)


def request_seed(arm_seed: int, key: int) -> int:
    """The per-request sampling seed: a function of (arm seed, prompt key) only, never of neighbours."""
    return derive_seed("request", arm_seed, key)


def arm_request_seed(arm_seed: int, key: int, options: Mapping[str, object]) -> int:
    """The seed a request of an arm is generated with: `request_seed`, or, where the arm's backend
    options say `request_seeds = "arm"` (the server backend, for protocols that send one seed with
    every request), the arm seed itself. Dispatch and the row both read it here."""
    return arm_seed if options.get("request_seeds") == "arm" else request_seed(arm_seed, key)
