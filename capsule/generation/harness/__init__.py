"""Runs made by other harnesses, read into the capsule's generation rows (`capsule import-samples`).

`records` reads a file into (where, record) pairs (JSONL, a JSON array, or parquet when pyarrow is
installed); `samples` holds what every importer checks (the 541 pinned prompts, duplicates, the
harness's own verdicts); `lm_eval` and `lighteval` know each harness's row layouts; `rows` turns
samples into generation rows. Every problem is one BadInputError naming the file, line and field,
raised before anything is written.
"""

from __future__ import annotations

LM_EVAL = "lm-eval"
LIGHTEVAL = "lighteval"
HARNESSES: tuple[str, ...] = (LM_EVAL, LIGHTEVAL)  # light on purpose: `capsule --help` reads it
