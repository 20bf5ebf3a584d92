"""What every harness import checks and keeps: the pinned prompt of each row, no duplicate documents,
and the harness's own per-instruction verdicts in the capsule's score-row shape.

A problem is one BadInputError: `file:line: field `name`: what is wrong; how to fix it`.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError
from ifeval_scorer import Prompt

READINGS = ("strict", "loose")
IFEVAL_FIX = "import the harness's IFEval (google/IFEval, 541 prompts) samples only"


@dataclass(frozen=True)
class ImportedSample:
    """One harness row: the prompt key, the stored text, the text the harness scored, its verdicts."""

    key: int
    where: str
    raw: str  # the model's text as the harness stored it
    response: str  # the text the harness scored (raw, less what the harness itself strips)
    verdicts: Mapping[str, Mapping[str, Any]]  # {"strict"|"loose": {"prompt": bool, "instructions": [bool]}}
    think_removed: bool = False  # the text scored is the stored text less what the harness stripped
    scored_field: str = ""  # where `response` came from: the field, or how it was derived from `raw`
    truncated_tokens: int = 0  # prompt tokens the harness cut from the left of the input before generating


@dataclass(frozen=True)
class HarnessImport:
    """A whole harness file, validated: which harness and row layout, the file's sha256, its samples."""

    harness: str
    layout: str
    path: Path
    sha256: str
    samples: tuple[ImportedSample, ...]


def bad(where: str, field: str, problem: str, fix: str) -> BadInputError:
    """The one error shape of an import: file and line, the field, what is wrong, how to fix it."""
    return BadInputError(f"{where}: field `{field}`: {problem}; {fix}")


def decoded(value: Any) -> Any:
    """A nested value as stored: as is, or parsed when a writer turned it into JSON or Python text
    (some details exports hold dicts and lists as strings)."""
    if not isinstance(value, str) or not value.strip().startswith(("{", "[")):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def field(where: str, record: Mapping[str, Any], name: str, kind: type, fix: str, prefix: str = "") -> Any:
    """`record[name]` (decoded) if it is a `kind`; otherwise the import's error, naming the field."""
    if name not in record:
        raise bad(where, prefix + name, "missing", fix)
    value = record[name] if kind is str else decoded(record[name])  # text is never parsed
    if not isinstance(value, kind):
        raise bad(where, prefix + name, f"a {type(value).__name__}, expected a {kind.__name__}", fix)
    return value


def first_text(where: str, value: Any, name: str) -> str:
    """The first generation of a list field (`filtered_resps`, `text`, `predictions`), or the string
    itself (never parsed: a response may well be JSON). Decode a list stored as text first."""
    while isinstance(value, list) and value:
        value = value[0]
    if not isinstance(value, str):
        raise bad(where, name, f"holds no response text (found {type(value).__name__})", IFEVAL_FIX)
    return value


def key_of_prompt(where: str, name: str, text: str, by_text: Mapping[str, int]) -> int:
    """The pinned key whose prompt is exactly `text` (the error names the field otherwise)."""
    if text not in by_text:
        raise bad(where, name, "its prompt is not among the 541 pinned IFEval prompts", IFEVAL_FIX)
    return by_text[text]


def check_instructions(where: str, name: str, ids: Any, prompt: Prompt) -> None:
    """The row's instruction list must be the pinned prompt's (another list is another IFEval)."""
    if ids is not None and tuple(decoded(ids)) != prompt.instruction_id_list:
        raise bad(
            where, name, f"{list(decoded(ids))} differs from key {prompt.key}'s pinned instructions "
            f"{list(prompt.instruction_id_list)}", IFEVAL_FIX,
        )


def harness_verdicts(
    where: str, metrics: Mapping[str, Any], n_instructions: int, prefix: str
) -> dict[str, dict[str, Any]]:
    """The harness's four per-sample metrics as {reading: {"prompt", "instructions"}}, checked: a
    prompt-level 0/1 and an instruction-level list as long as the prompt's instruction list."""
    fix = "the file must hold the harness's per-sample IFEval metrics (all four)"
    out: dict[str, dict[str, Any]] = {}
    for reading in READINGS:
        prompt_name, inst_name = f"prompt_level_{reading}_acc", f"inst_level_{reading}_acc"
        prompt_value = decoded(metrics.get(prompt_name))
        flags = decoded(metrics.get(inst_name))
        if prompt_value is None or flags is None:
            missing = prompt_name if prompt_value is None else inst_name
            raise bad(where, prefix + missing, "missing", fix)
        if not isinstance(prompt_value, (bool, int, float)) or prompt_value not in (0, 1):
            raise bad(where, prefix + prompt_name, f"{prompt_value!r} is not a 0/1 verdict", fix)
        if not isinstance(flags, list) or len(flags) != n_instructions or any(f not in (0, 1) for f in flags):
            raise bad(
                where, prefix + inst_name, f"expected {n_instructions} verdicts (one per instruction), "
                f"found {flags!r}", fix,
            )
        instructions = [bool(f) for f in flags]
        if bool(prompt_value) != all(instructions):
            problem = f"{prompt_value!r} contradicts {prefix + inst_name} {flags!r}"
            raise bad(where, prefix + prompt_name, problem, fix)
        out[reading] = {"prompt": bool(prompt_value), "instructions": instructions}
    return out


def unique_samples(samples: Sequence[ImportedSample], key_field: str) -> tuple[ImportedSample, ...]:
    """The samples, refusing a document that appears twice (the error names both places)."""
    seen: dict[int, str] = {}
    for sample in samples:
        if sample.key in seen:
            raise bad(
                sample.where, key_field, f"document for key {sample.key} repeats {seen[sample.key]}",
                "import one run per file (each of the 541 prompts at most once)",
            )
        seen[sample.key] = sample.where
    return tuple(samples)

