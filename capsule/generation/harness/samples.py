"""What every harness import checks and keeps: the pinned prompt of each row, no duplicate documents,
and the harness's own per-instruction verdicts in the capsule's score-row shape.

A problem is one BadInputError: `file:line: field `name`: what is wrong; how to fix it`.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError
from capsule.jsonio import parse_json
from ifeval_scorer import Prompt
from ifeval_scorer.jsonl import MAX_DEPTH, MAX_NUMBER_CHARS

READINGS = ("strict", "loose")
IFEVAL_FIX = "import the harness's IFEval (google/IFEval, 541 prompts) samples only"
NOT_A_LITERAL = object()  # what `python_literal` returns for text it does not read
MAX_LITERAL_CHARS = 1 << 24  # a field's text; the whole file is already bounded by the reader


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
    (some details exports hold dicts and lists as strings). JSON goes through the one strict reader
    (`capsule.jsonio`); Python text through `python_literal`. Text that is neither stays text, and
    the field's type check then names it."""
    if not isinstance(value, str) or not value.strip().startswith(("{", "[")):
        return value
    try:
        return parse_json(value, "a nested field")
    except BadInputError:
        pass
    literal = python_literal(value)
    return value if literal is NOT_A_LITERAL else literal


def python_literal(text: str) -> Any:
    """A Python list or dict repr (lighteval's legacy details store `str(list)`), read under the JSON
    reader's rules: only strings, finite numbers of at most `MAX_NUMBER_CHARS` characters, booleans,
    None, lists, tuples (as lists) and dicts with string keys, each key once, nested at most
    `MAX_DEPTH` deep. Anything else is `NOT_A_LITERAL`. `ast.parse` only parses (it runs nothing);
    unlike `ast.literal_eval` no input makes this raise, recurse without bound, or build a set."""
    if len(text) > MAX_LITERAL_CHARS:
        return NOT_A_LITERAL
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # MemoryError: the parser's own stack
        return NOT_A_LITERAL
    try:
        return _literal(tree.body, 0)
    except _NotLiteral:
        return NOT_A_LITERAL


class _NotLiteral(Exception):
    """Raised inside `_literal` for a node outside the accepted literals."""


def _literal(node: ast.AST, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise _NotLiteral
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool, type(None))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        number = _literal(node.operand, depth + 1)
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise _NotLiteral
        return -number
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        if len(repr(node.value)) > MAX_NUMBER_CHARS or not math.isfinite(node.value):
            raise _NotLiteral
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item, depth + 1) for item in node.elts]
    if isinstance(node, ast.Dict):
        result: dict[str, Any] = {}
        for key_node, item in zip(node.keys, node.values, strict=True):
            key = _literal(key_node, depth + 1) if key_node is not None else None
            if not isinstance(key, str) or key in result:
                raise _NotLiteral
            result[key] = _literal(item, depth + 1)
        return result
    raise _NotLiteral


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
    if ids is None:
        return
    listed = decoded(ids)
    if not isinstance(listed, list):
        raise bad(where, name, f"a {type(listed).__name__}, expected a list of instruction ids", IFEVAL_FIX)
    if tuple(listed) != prompt.instruction_id_list:
        raise bad(
            where, name, f"{listed} differs from key {prompt.key}'s pinned instructions "
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

