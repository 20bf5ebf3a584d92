"""The IFEval prompt set: read an `input_data.jsonl` into {key: Prompt}, validated row by row.

The scorer takes its prompts from the caller (a path or a loaded mapping): which file is the right
one, and how it is fetched and verified, is the caller's business (the capsule pins it by sha256).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from ifeval_scorer.errors import ScorerInputError
from ifeval_scorer.jsonl import read_lines


@dataclass(frozen=True)
class Prompt:
    """One IFEval prompt: its integer key, the text, and the instructions it carries."""

    key: int
    prompt: str
    instruction_id_list: tuple[str, ...]
    kwargs: tuple[dict[str, Any], ...]


PromptSource: TypeAlias = Mapping[int, Prompt] | str | os.PathLike[str]


def _row(row: Any) -> Prompt:
    if isinstance(row.get("key"), bool) or not isinstance(row.get("key"), int):
        raise ValueError(f"key {row.get('key')!r} is not an integer")
    return Prompt(
        key=int(row["key"]),
        prompt=str(row["prompt"]),
        instruction_id_list=tuple(row["instruction_id_list"]),
        kwargs=tuple(dict(k or {}) for k in row["kwargs"]),
    )


def load_prompts(path: str | os.PathLike[str]) -> dict[int, Prompt]:
    """Read an IFEval `input_data.jsonl` into {key: Prompt}; errors name the file and line.

    Every problem (missing file, bad JSON, a row without the IFEval fields, a duplicate key) is one
    `ScorerInputError`, so a caller can report it in one line.
    """
    path = Path(path)
    prompts: dict[int, Prompt] = {}
    for number, row in read_lines(path, "prompts file"):
        try:
            prompt = _row(row)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ScorerInputError(
                f"{path}:{number}: not an IFEval prompt row ({error}); use the pinned input_data.jsonl"
            ) from error
        if prompt.key in prompts:
            raise ScorerInputError(f"{path}:{number}: duplicate key {prompt.key}")
        prompts[prompt.key] = prompt
    return prompts


def prompt_table(prompts: PromptSource) -> Mapping[int, Prompt]:
    """The prompts to score against: a loaded {key: Prompt} as given, or a path read by `load_prompts`."""
    if isinstance(prompts, Mapping):
        return prompts
    return load_prompts(prompts)
