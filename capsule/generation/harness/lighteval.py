"""lighteval IFEval details (`lighteval ... --save-details`: details_<task>_<date>.parquet).

Two row layouts are supported, told apart by their columns:

- lighteval 0.10 and later: `doc` (the Doc: `query` is the prompt, `specific` holds
  `instructions_id_list` and `kwargs`), `model_response` (`text`: the generations) and `metric`
  (the four per-sample metrics: prompt level 0/1, instruction level a list of booleans);
- lighteval 0.5 to 0.9: `example` (the prompt), `predictions` (the generations), `metrics`,
  `specifics` (`instructions_id_list`, `kwargs`), beside `full_prompt`, `gold`, `choices` ...

Rows carry no IFEval key, so each is matched to a pinned prompt by its exact text. The text scored:
lighteval records it where its version does (0.13 does): `model_response.text_post_processed` (the
generation less what `--reasoning-tags` removes), and that is scored here as it is; without it,
lighteval's IFEval metric removes `<think>...</think>` blocks before it checks a response (since its
fix of issue 790), so the text scored is the stored text less those blocks. Each sample says which
(`scored_field`), and a difference that the stored text explains is reported as such.
`model_response.truncated_tokens_count` (prompt tokens lighteval cut from the left of the input; its
transformers backend, for one, keeps only as many input tokens as its `max_length` leaves beside
`max_new_tokens`) is kept, so an import flags answers to a prompt the model never saw whole. Parquet
needs pyarrow; the same rows as JSONL work without it. Later lighteval versions whose IFEval metric
stores only prompt-level verdicts are refused (the instruction-level fields are missing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capsule.generation.harness import LIGHTEVAL
from capsule.generation.harness.records import Records
from capsule.generation.harness.samples import (
    ImportedSample,
    bad,
    check_instructions,
    decoded,
    field,
    first_text,
    harness_verdicts,
    key_of_prompt,
)
from ifeval_scorer import Prompt

HARNESS = LIGHTEVAL
LAYOUT_DOC = "lighteval >= 0.10 details (doc, model_response, metric)"
LAYOUT_LEGACY = "lighteval 0.5-0.9 details (example, predictions, metrics, specifics)"
FIX = "give lighteval's IFEval details (details_*ifeval*.parquet, or the same rows as JSONL)"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
POST_PROCESSED = "model_response.text_post_processed"  # the text lighteval scored, where it records it
WITHOUT_THINK = "model_response.text less <think> blocks"
LEGACY_SCORED = "predictions less <think> blocks"


def without_think_blocks(text: str) -> str:
    """`text` less every `<think>...</think>` block, as lighteval's IFEval metric scores it."""
    while True:
        start = text.find(THINK_OPEN)
        end = text.find(THINK_CLOSE, start) if start >= 0 else -1
        if start < 0 or end < 0:
            return text
        text = text[:start] + text[end + len(THINK_CLOSE):]


def layout_of(where: str, row: Any) -> str:
    """Which lighteval row layout `row` has (the error names the fields an IFEval details row needs)."""
    if not isinstance(row, Mapping):
        raise bad(where, "(row)", f"a {type(row).__name__}, expected a JSON object", FIX)
    if {"doc", "model_response", "metric"} <= set(row):
        return LAYOUT_DOC
    if {"example", "predictions", "metrics"} <= set(row):
        return LAYOUT_LEGACY
    if "doc_id" in row and "filtered_resps" in row:
        raise bad(where, "filtered_resps", "this is an lm-eval sample row",
                  "use `capsule import-samples lm-eval`")
    missing = "model_response" if "doc" in row else "doc"
    raise bad(where, missing, "missing: neither lighteval details layout (doc/model_response/metric, or "
              "example/predictions/metrics)", FIX)


def lighteval_sample(
    where: str, row: Mapping[str, Any], layout: str, prompts: Mapping[int, Prompt], by_text: Mapping[str, int]
) -> ImportedSample:
    """One lighteval details row of `layout`, validated against the pinned prompts."""
    truncated = 0
    if layout == LAYOUT_DOC:
        doc = field(where, row, "doc", dict, FIX)
        text, text_field = field(where, doc, "query", str, FIX, "doc."), "doc.query"
        specific = decoded(doc.get("specific")) or {}
        model_response = field(where, row, "model_response", dict, FIX)
        raw = first_text(where, decoded(model_response.get("text")), "model_response.text")
        post = decoded(model_response.get("text_post_processed"))
        if post is not None and post != []:  # lighteval recorded the text it scored: take it as is
            response, scored = first_text(where, post, POST_PROCESSED), POST_PROCESSED
        else:
            response, scored = without_think_blocks(raw), WITHOUT_THINK
        truncated = truncated_count(where, model_response.get("truncated_tokens_count"))
        metrics, metric_prefix, ids_field = field(where, row, "metric", dict, FIX), "metric.", "doc.specific"
    else:
        text, text_field = field(where, row, "example", str, FIX), "example"
        specific = decoded(row.get("specifics")) or {}
        raw = first_text(where, decoded(row.get("predictions")), "predictions")  # may be a list's repr
        response, scored = without_think_blocks(raw), LEGACY_SCORED
        metrics, metric_prefix, ids_field = field(where, row, "metrics", dict, FIX), "metrics.", "specifics"
    key = key_of_prompt(where, text_field, text, by_text)
    if isinstance(specific, Mapping):
        check_instructions(where, f"{ids_field}.instructions_id_list", specific.get("instructions_id_list"),
                           prompts[key])
    verdicts = harness_verdicts(where, metrics, len(prompts[key].instruction_id_list), metric_prefix)
    return ImportedSample(key=key, where=where, raw=raw, response=response, verdicts=verdicts,
                          think_removed=response != raw, scored_field=scored, truncated_tokens=truncated)


def truncated_count(where: str, value: Any) -> int:
    """`model_response.truncated_tokens_count` as a count (0 when absent, as before lighteval 0.10)."""
    value = decoded(value)
    if value is None:
        return 0
    if isinstance(value, list):  # one per generation in some exports
        value = max(value, default=0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise bad(where, "model_response.truncated_tokens_count", f"{value!r} is not a token count", FIX)
    return value


def read_lighteval(records: Records, prompts: Mapping[int, Prompt]) -> tuple[str, list[ImportedSample]]:
    """The layout and every row of a lighteval details file (one layout per file), validated."""
    by_text = {prompt.prompt: key for key, prompt in prompts.items()}
    layout = layout_of(*records[0])
    samples = []
    for where, row in records:
        if layout_of(where, row) != layout:
            raise bad(where, "(row)", f"layout differs from the file's first row ({layout})", FIX)
        samples.append(lighteval_sample(where, row, layout, prompts, by_text))
    return layout, samples
