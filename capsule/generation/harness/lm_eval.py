"""lm-evaluation-harness IFEval sample logs (`lm_eval --tasks ifeval --log_samples`).

Supported: the `samples_ifeval_<date>.jsonl` rows of lm-eval 0.4.x (read from 0.4.13's evaluator;
the ifeval task versions 1.0 to 4.0 log the same fields). One JSON object a line:

    doc_id, doc {key, prompt, instruction_id_list, kwargs}, target, arguments,
    resps [[text]], filtered_resps [text], filter, metrics [names], doc_hash, prompt_hash,
    target_hash, and the four per-sample metrics: prompt_level_strict_acc (bool),
    inst_level_strict_acc ([bool] per instruction), prompt_level_loose_acc, inst_level_loose_acc

The text the harness scored is `filtered_resps[0]` (what its `process_results` receives); the raw
generation is `resps[0][0]`. `filter`, `metrics` and the hashes arrived during 0.4.x and are read
when present.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capsule.generation.harness import LM_EVAL
from capsule.generation.harness.records import Records
from capsule.generation.harness.samples import (
    IFEVAL_FIX,
    ImportedSample,
    bad,
    check_instructions,
    field,
    first_text,
    harness_verdicts,
    key_of_prompt,
)
from ifeval_scorer import METRICS, Prompt

HARNESS = LM_EVAL
LAYOUT = "lm-eval 0.4.x --log_samples (samples_ifeval_*.jsonl)"
SCORED_FIELD = "filtered_resps[0]"  # what the ifeval task's process_results receives
FIX = "give an lm-eval 0.4 `--log_samples` file of the ifeval task (samples_ifeval_*.jsonl)"


def lm_eval_sample(
    where: str, row: Any, prompts: Mapping[int, Prompt], by_text: Mapping[str, int]
) -> ImportedSample:
    """One lm-eval sample row, validated against the pinned prompts."""
    if not isinstance(row, Mapping):
        raise bad(where, "(row)", f"a {type(row).__name__}, expected a JSON object", FIX)
    if "model_response" in row or "predictions" in row:
        raise bad(where, "model_response" if "model_response" in row else "predictions",
                  "this is a lighteval details row", "use `capsule import-samples lighteval`")
    for name in ("doc_id", "doc", "filtered_resps"):
        if name not in row:
            raise bad(where, name, "missing: not an lm-eval 0.4 sample row", FIX)
    listed = row.get("metrics")
    if isinstance(listed, list) and not set(METRICS) <= set(listed):
        raise bad(where, "metrics", f"lists {listed}, not the four IFEval metrics", FIX)
    doc = field(where, row, "doc", dict, FIX)
    text = field(where, doc, "prompt", str, FIX, "doc.")
    key = key_of_prompt(where, "doc.prompt", text, by_text)
    if "key" in doc and str(doc["key"]) != str(key):
        raise bad(where, "doc.key", f"{doc['key']!r}, but its prompt is pinned key {key}", IFEVAL_FIX)
    check_instructions(where, "doc.instruction_id_list", doc.get("instruction_id_list"), prompts[key])
    response = first_text(where, row["filtered_resps"], "filtered_resps")
    raw = first_text(where, row["resps"], "resps") if row.get("resps") else response
    verdicts = harness_verdicts(where, row, len(prompts[key].instruction_id_list), "")
    return ImportedSample(key=key, where=where, raw=raw, response=response, verdicts=verdicts,
                          scored_field=SCORED_FIELD)


def read_lm_eval(records: Records, prompts: Mapping[int, Prompt]) -> list[ImportedSample]:
    """Every row of an lm-eval sample log, validated (the first problem raises, naming where)."""
    by_text = {prompt.prompt: key for key, prompt in prompts.items()}
    return [lm_eval_sample(where, row, prompts, by_text) for where, row in records]

