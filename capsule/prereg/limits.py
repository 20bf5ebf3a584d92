"""Upper bounds on the plan settings that drive time or memory, each with why: written once, here.

A plan beyond a bound (or `capsule generate` options, read by the same parser) is refused when it is
loaded, so at seal time and before any run, with the bound and its reason in the message: nothing
is allocated or started first. The bounds are generous, several times what any sealed plan uses
(the largest today: max_new_tokens 16384, batch_size 48, k 10, bootstrap_resamples 10000), and they
only stop settings that would run for days or ask for terabytes. prereg/README.md lists them.
Backend options carry their own ranges beside their declaration (`capsule.prereg.backend_specs`);
a count of prompts by the pinned prompt file (`capsule.pins.IFEVAL_PROMPTS_N`).
"""

from __future__ import annotations

from dataclasses import dataclass

from capsule.pins import IFEVAL_PROMPTS_N


@dataclass(frozen=True)
class Limit:
    """The largest value a setting may take, and why (quoted in the error)."""

    high: int
    why: str


#: TOML integers are signed 64-bit (the spec); Python's tomllib reads any size, so every integer of a
#: plan is held to this unless a tighter limit applies.
TOML_INTEGER = Limit(2**63 - 1, "TOML integers are signed 64-bit")

MAX_NEW_TOKENS = Limit(
    131_072, "128k tokens, the longest context of current open models; generation time grows with it"
)
BATCH_SIZE = Limit(
    1_024, "vLLM's max_num_seqs rarely exceeds 1024; a static hf batch holds every row's KV cache at once"
)
STABILITY_REPEATS = Limit(
    100, "each repetition scores the whole arm again; 10 already measure the scorer's spread"
)
BOOTSTRAP_RESAMPLES = Limit(
    100_000,
    "drawing the resamples takes about 24 bytes per resample and prompt at its peak (1.3 GB at "
    "100000 x 541), and 10000 "
    "already puts the percentile's Monte Carlo error well under the interval's width",
)
PROMPTS = Limit(
    IFEVAL_PROMPTS_N, f"the pinned prompt file holds {IFEVAL_PROMPTS_N} prompts"
)  # a subset's n, and min_n / min_pairs (more could only ever read UNDERPOWERED)
TABLES = Limit(
    256, "each arm is a whole generation run and each comparison a bootstrap; sealed plans have 14 at most"
)  # [[arms]], [[controls]], [[comparisons]] and [prompts.subsets] entries of one plan
