"""Read one harness file into a validated `HarnessImport`: dispatch by harness, checks shared by all.

Everything is read and checked before the caller writes anything, so a bad file leaves no trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from capsule.errors import BadInputError
from capsule.generation.harness import HARNESSES, lighteval, lm_eval
from capsule.generation.harness.records import read_records
from capsule.generation.harness.samples import HarnessImport, unique_samples
from capsule.hashing import sha256_file
from ifeval_scorer import Prompt


def read_harness_file(harness: str, path: Path, prompts: Mapping[int, Prompt]) -> HarnessImport:
    """`path` read as `harness`'s IFEval samples, every row checked against the pinned prompts."""
    if harness not in HARNESSES:
        raise BadInputError(f"unknown harness {harness!r}; use one of {', '.join(HARNESSES)}")
    records = read_records(path)
    if harness == lm_eval.HARNESS:
        layout, samples, key_field = lm_eval.LAYOUT, lm_eval.read_lm_eval(records, prompts), "doc.key"
    else:
        layout, samples = lighteval.read_lighteval(records, prompts)
        key_field = "doc.query" if layout == lighteval.LAYOUT_DOC else "example"
    return HarnessImport(
        harness=harness,
        layout=layout,
        path=path,
        sha256=sha256_file(path),
        samples=unique_samples(samples, key_field),
    )
