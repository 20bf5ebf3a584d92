"""One place tests build `Arm`s: a complete greedy fake-backend arm, with any field overridden.

When `Arm` gains a required field, only this file changes.
"""

from __future__ import annotations

from typing import Any

from capsule.prereg.plan import Arm, Decoding

GREEDY = Decoding("greedy", 0.0, 1.0, 0, 0.0, 0.0, 1.0)  # the plan loader's neutral greedy values

_BASE: dict[str, Any] = {
    "name": "a",
    "backend": "fake",
    "subset": "s",
    "dtype": "float32",
    "batch_size": 2,
    "batch_order": "file",
    "seed": 0,
    "max_new_tokens": 12,
    "thinking": "off",
    "unclosed": "empty",
    "decoding": GREEDY,
}


def build_arm(**fields: Any) -> Arm:
    """An arm with the base settings above and `fields` replacing any of them."""
    return Arm(**{**_BASE, **fields})
