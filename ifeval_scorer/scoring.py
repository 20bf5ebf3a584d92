"""`score(rows, prompts=...)`: the scorer's entry point, from validated rows to `Scores`.

The caller supplies the prompts (a path to an IFEval `input_data.jsonl` or a loaded {key: Prompt});
the scorer never fetches anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ifeval_scorer.errors import ScorerInputError
from ifeval_scorer.evaluate import evaluate_prompt
from ifeval_scorer.files import check_output_path, write_text_atomic
from ifeval_scorer.inputs import Response, read_generations, rows_in_memory, validate_rows
from ifeval_scorer.jsonl import dumps_line
from ifeval_scorer.prompts import Prompt, PromptSource, prompt_table
from ifeval_scorer.scores import Scores


def score_responses(
    responses: Iterable[Response], prompts: Mapping[int, Prompt], *, seed: int | None = 0
) -> Scores:
    """Score already validated responses against their prompts."""
    verdicts = tuple(evaluate_prompt(prompts[item.key], item.response, seed) for item in responses)
    return Scores(prompts=verdicts, seed=seed)


def score(
    rows: Iterable[Mapping[str, Any]],
    *,
    seed: int | None = 0,
    prompts: PromptSource,
) -> Scores:
    """Score rows with `key` (or the exact `prompt` text) and `response` against `prompts`.

    `seed` (default 0) makes the result a pure function of (rows, prompts, seed); `seed=None` draws
    like upstream's unseeded scorer, so calling it k times measures upstream's spread. `prompts` is a
    path to an IFEval prompt file or a loaded {key: Prompt}. Bad rows raise `ScorerInputError` before
    anything is scored.
    """
    table = prompt_table(prompts)
    return score_responses(validate_rows(rows_in_memory(rows), table), table, seed=seed)


def default_output(generations: Path) -> Path:
    """Where scores go by default: `<name>.scores.jsonl` beside the generations file."""
    name = generations.name.removesuffix(".jsonl")
    return generations.with_name(f"{name}.scores.jsonl")


def score_file(
    generations: Path,
    output: Path | None = None,
    *,
    seed: int | None = 0,
    prompts: PromptSource,
    write: Callable[[Path, list[dict[str, Any]]], None] | None = None,
) -> tuple[Scores, Path]:
    """Score a generations JSONL file and write the scores JSONL (atomically); return both.

    Every row is validated first: a bad row raises `ScorerInputError` naming the file, line and key,
    and the output path is left untouched. `write(path, rows)` writes the rows (`capsule score` passes
    the run's own score writer, so both give the same bytes); by default one JSON object a line.
    """
    target = output if output is not None else default_output(generations)
    if os.path.realpath(target) == os.path.realpath(generations):  # a link loop: the reader refuses it
        raise ScorerInputError(
            f"{target}: output would overwrite the generations file; pass another --out"
        )
    check_output_path(target)
    table = prompt_table(prompts)
    scores = score_responses(read_generations(generations, table), table, seed=seed)
    if write is not None:
        write(target, scores.rows)
        return scores, target
    write_text_atomic(target, "".join(dumps_line(row, compact=True) for row in scores.rows))
    return scores, target
