"""Imported samples as capsule generation rows (DESIGN.md's row format, extended with `source`).

What a harness file does not record (input ids, token counts, batch, seed, timing) is null rather
than guessed; `raw` is the text as the harness stored it and `response` the text it scored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capsule.generation.harness.samples import HarnessImport
from capsule.hashing import sha256_bytes
from ifeval_scorer import Prompt


def generation_rows(imported: HarnessImport, arm: str, prompts: Mapping[int, Prompt]) -> list[dict[str, Any]]:
    """One generation row per imported sample, in the file's order."""
    return [
        {
            "key": sample.key,
            "arm": arm,
            "prompt_sha256": sha256_bytes(prompts[sample.key].prompt.encode("utf-8")),
            "input_ids_sha256": None,
            "n_prompt_tokens": None,
            "raw": sample.raw,
            "response": sample.response,
            "thinking_closed": True if sample.think_removed else None,
            "n_output_tokens": None,
            "finish_reason": None,
            "batch_index": None,
            "batch_keys_sha256": None,
            "batch_size": None,
            "seed": None,
            "elapsed_s": None,
            "source": {"harness": imported.harness, "where": sample.where, "scored": sample.scored_field,
                       "truncated_tokens": sample.truncated_tokens},
        }
        for sample in imported.samples
    ]
