"""Small harness sample files written by the tests themselves, in lm-eval's and lighteval's layouts.

The prompts come from the pinned prompt file (never committed); the responses are ours. A row's
stored verdicts start as our scorer's at seed 0 (what a harness running Google's reference stores
for a deterministic instruction) and `flips` overrides some of them, to stand for a harness that
decided differently. Field names and nesting follow each harness's documented sample layout
(lm-eval 0.4 `--log_samples`; lighteval details before and after 0.10); no file of theirs is copied.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ifeval_scorer import METRICS, Prompt, evaluate_prompt

Flips = Mapping[int, Mapping[str, bool]]  # instruction index -> {"strict"|"loose": stored verdict}

# The file names each harness writes (a timestamp with a capital T, lighteval's `|` between task and
# few-shot count), as lm-eval 0.4.13 and lighteval 0.13.0 named their files in the runs issue 30 reports.
LM_EVAL_FILE = "samples_ifeval_2026-12-01T19-29-51.193973.jsonl"
LIGHTEVAL_FILE = "details_ifeval|0_2026-12-01T20-19-23.902605.parquet"
LIGHTEVAL_JSONL_FILE = "details_ifeval|0_2026-12-01T20-19-23.902605.jsonl"  # the same rows exported as JSONL


def stored_verdicts(prompt: Prompt, scored_text: str, flips: Flips | None = None) -> dict[str, Any]:
    """The four per-sample metrics a harness stores: ours at seed 0 on `scored_text`, with `flips`."""
    verdicts = evaluate_prompt(prompt, scored_text, 0)
    out: dict[str, Any] = {}
    for reading in ("strict", "loose"):
        flags = list(getattr(verdicts, reading))
        for index, change in (flips or {}).items():
            if reading in change:
                flags[index] = change[reading]
        out[f"prompt_level_{reading}_acc"] = all(flags)
        out[f"inst_level_{reading}_acc"] = flags
    return out


def lm_eval_row(doc_id: int, prompt: Prompt, response: str, flips: Flips | None = None) -> dict[str, Any]:
    """One lm-eval 0.4 `--log_samples` row of the ifeval task."""
    return {
        "doc_id": doc_id,
        "doc": {
            "key": prompt.key,
            "prompt": prompt.prompt,
            "instruction_id_list": list(prompt.instruction_id_list),
            "kwargs": [dict(k) for k in prompt.kwargs],
        },
        "target": 0,
        "arguments": {"gen_args_0": {"arg_0": prompt.prompt, "arg_1": {"until": [], "max_gen_toks": 1280}}},
        "resps": [[response]],
        "filtered_resps": [response],
        "filter": "none",
        "metrics": list(METRICS),
        "doc_hash": f"doc-{prompt.key}",
        "prompt_hash": f"prompt-{prompt.key}",
        "target_hash": "target-0",
        **stored_verdicts(prompt, response, flips),
    }


def lighteval_row(prompt: Prompt, text: str, scored_text: str | None = None,
                  flips: Flips | None = None, post_processed: str | None = None,
                  truncated: int = 0) -> dict[str, Any]:
    """One lighteval >= 0.10 details row (doc, model_response, metric) of its ifeval task.

    `post_processed` given: the row as lighteval 0.13 writes it, `model_response` with every field of
    its ModelResponse, `text_post_processed` the text it scored (and stored verdicts on that text);
    `truncated`: its `truncated_tokens_count`."""
    scored = post_processed if scored_text is None else scored_text
    response: dict[str, Any] = {"input": prompt.prompt, "text": [text], "output_tokens": [], "logprobs": []}
    if post_processed is not None:
        response.update({
            "input_tokens": [1, 2, 3], "text_post_processed": [post_processed], "reasonings": [None],
            "argmax_logits_eq_gold": [], "logits": None, "unconditioned_logprobs": None,
            "truncated_tokens_count": truncated, "padded_tokens_count": 0,
        })  # fmt: skip
    return {
        "doc": {
            "query": prompt.prompt,
            "choices": [""],
            "gold_index": 0,
            "instruction": "",
            "specific": {"instructions_id_list": list(prompt.instruction_id_list),
                         "kwargs": [dict(k) for k in prompt.kwargs]},
            "task_name": "extended|ifeval",
        },
        "model_response": response,
        "metric": stored_verdicts(prompt, text if scored is None else scored, flips),
    }


def lighteval_legacy_row(prompt: Prompt, text: str, flips: Flips | None = None) -> dict[str, Any]:
    """One lighteval 0.5-0.9 details row (example, predictions, metrics, specifics), nested fields as
    the text some exports leave them in."""
    return {
        "example": prompt.prompt,
        "instruction": "",
        "full_prompt": prompt.prompt,
        "num_effective_few_shots": 0,
        "num_asked_few_shots": 0,
        "predictions": str([text]),
        "gold": [""],
        "choices": [],
        "gold_index": [],
        "metrics": str(stored_verdicts(prompt, text, flips)),
        "specifics": str({"instructions_id_list": list(prompt.instruction_id_list), "kwargs": []}),
    }


def write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write rows as JSON lines; return the path."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path
