"""A short throughput probe: a few prompts through the transformers backend, to size a new plan.

The probe runs an ad-hoc arm (held to the plan loader's rules like any other) into a temporary
directory that is deleted afterwards, and reads generation throughput from its rows the way the
analysis does (model loading excluded).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from capsule.analysis.throughput import timing_scope, token_stats
from capsule.artifacts.pinned_prompts import fetch_prompts
from capsule.errors import UnavailableError
from capsule.generation.arm_runner import generate_arm
from capsule.jsonio import read_jsonl_complete
from capsule.prereg.adhoc import AdhocOptions, adhoc_arm_table, parse_arm_table

PROBE_PROMPTS = 4  # the first prompts of the file
PROBE_BATCH = 4
PROBE_TOKENS = 64  # new tokens per prompt: long enough to time decoding, short enough for seconds


@dataclass(frozen=True)
class Probe:
    """What the probe measured."""

    tokens_per_s: float
    tokens: int
    wall_s: float

    def describe(self, dtype: str) -> str:
        """One line saying how the figure was measured."""
        return (
            f"{self.tokens_per_s:.1f} tok/s (probe: transformers, {dtype}, batch {PROBE_BATCH}, "
            f"{PROBE_PROMPTS} prompts x {PROBE_TOKENS} tokens: {self.tokens} tokens in {self.wall_s:.1f} s)"
        )


def probe_throughput(model_dir: Path, dtype: str) -> Probe:
    """Generate `PROBE_PROMPTS` prompts with transformers and return the generation throughput."""
    from ifeval_scorer import load_prompts

    prompts = load_prompts(fetch_prompts().path)
    options = AdhocOptions("probe", "hf", dtype, PROBE_BATCH, "file", 0, PROBE_TOKENS)
    arm = parse_arm_table(adhoc_arm_table(options), "throughput probe")
    with tempfile.TemporaryDirectory(prefix="capsule-probe-") as scratch:
        result = generate_arm(
            arm,
            prompts=prompts,
            keys=list(prompts)[:PROBE_PROMPTS],
            model_dir=model_dir,
            out_dir=Path(scratch),
            plan_hash="throughput-probe",
            manifest_digest="",
            progress=False,
        )
        stats = token_stats(read_jsonl_complete(result.rows_path), timing_scope(arm))
    if not stats.tokens_per_s:
        raise UnavailableError(f"{model_dir}: the probe generated no tokens; give --tok-per-s")
    return Probe(stats.tokens_per_s, stats.total, stats.wall_s)
