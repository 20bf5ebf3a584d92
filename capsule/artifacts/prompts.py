"""The IFEval prompt set: load the pinned 541-row file, validate it, and draw seeded subsamples."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError


@dataclass(frozen=True)
class Prompt:
    """One IFEval prompt: its integer key, the text, and the instructions it carries."""

    key: int
    prompt: str
    instruction_id_list: tuple[str, ...]
    kwargs: tuple[dict[str, Any], ...]


def load_prompts(path: Path) -> dict[int, Prompt]:
    """Read an IFEval `input_data.jsonl` into {key: Prompt}; errors name the file and line."""
    prompts: dict[int, Prompt] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key = int(row["key"])
                prompt = Prompt(
                    key=key,
                    prompt=str(row["prompt"]),
                    instruction_id_list=tuple(row["instruction_id_list"]),
                    kwargs=tuple(dict(k or {}) for k in row["kwargs"]),
                )
            except (ValueError, KeyError, TypeError) as error:
                raise BadInputError(
                    f"{path}:{number}: not an IFEval prompt row ({error}); use the pinned input_data.jsonl"
                ) from error
            if key in prompts:
                raise BadInputError(f"{path}:{number}: duplicate key {key}")
            prompts[key] = prompt
    return prompts


def seeded_subsample(keys: list[int], n: int, seed: int) -> list[int]:
    """`random.Random(seed).sample(sorted(keys), n)`: the subsample rule plans declare (the seed study's)."""
    if n > len(keys):
        raise BadInputError(f"subsample of {n} asked from {len(keys)} prompts; lower n")
    return random.Random(seed).sample(sorted(keys), n)
