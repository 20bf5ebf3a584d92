"""The capsule's own rule on the IFEval prompt set: the seeded subsample a plan declares.

Reading the prompt file (`Prompt`, `load_prompts`) is the scorer's: import them from `ifeval_scorer`.
"""

from __future__ import annotations

import random

from capsule.errors import BadInputError


def seeded_subsample(keys: list[int], n: int, seed: int) -> list[int]:
    """`random.Random(seed).sample(sorted(keys), n)`: the subsample rule plans declare (the seed study's)."""
    if n > len(keys):
        raise BadInputError(f"subsample of {n} asked from {len(keys)} prompts; lower n")
    return random.Random(seed).sample(sorted(keys), n)
