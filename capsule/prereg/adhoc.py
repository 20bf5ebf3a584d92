"""Arms outside a sealed plan, held to the plan loader's rules: one rulebook for every arm.

`capsule generate` without a plan describes one arm by its options. `adhoc_arm_table` writes them
as the table a plan's `[[arms]]` entry would hold, and `parse_arm_table` reads it with the loader's
own parser (`capsule.prereg.loader.parse_arm`), so "greedy" means the loader's neutral values and
every check a sealed arm meets applies. `check_arm` puts any `Arm` built in code (a dry run's fake
arm, a library caller's) through the same parser before it runs.

An ad-hoc run is not sealed, and its run directory says so. It holds `adhoc.json`
(`adhoc_record`: the arm table, the prompt file's sha256 and the keys, as canonical JSON), and its
`run.json` records that file's sha256 as `plan_sha256`, `plan_path` "adhoc" and
`ledger_head_at_start` "none": no ledger entry precedes it, so it is never bundled
as evidence, and `reproduce` refuses it as a run of another plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from capsule.hashing import canonical_json, sha256_bytes
from capsule.prereg.arms import GREEDY_NEUTRAL, parse_arm
from capsule.prereg.plan import Arm
from capsule.prereg.tables import Section

ADHOC_FORMAT = 1  # version of adhoc.json's layout
ADHOC_SOURCE = "capsule generate options"  # names the source in messages, where a plan names its file
ADHOC_SUBSET = "adhoc"  # an ad-hoc arm's keys come from --keys / --first, not from a plan subset
ADHOC_PLAN_PATH = "adhoc"  # run.json's plan_path for a run made without a plan
NO_LEDGER_HEAD = "none"  # run.json's ledger_head_at_start: no ledger entry precedes an ad-hoc run

# The loader accepts mode "greedy" only with its neutral values (argmax, no penalties).
GREEDY_DECODING: dict[str, object] = {"mode": "greedy", **GREEDY_NEUTRAL}
# What an ad-hoc arm sets per backend (backend_options, env): vLLM needs enforce_eager declared
# (compiled and eager kernels give different bytes), and reserving no core for vLLM itself gives it
# every core of a small CPU machine (the thread count is recorded in the manifest). Its KV cache is a
# fixed ADHOC_KV_CACHE_BYTES, as every vLLM arm of the v3 GPU plan's is, so the engine is the same on
# every machine: vLLM's default share of memory (gpu_memory_utilization 0.3 on a CPU) gave 5.65 GiB
# on a 24 GiB host and less on a laptop, and took 16 s of each engine start to allocate on a 2-core
# EPYC (benchmarks/README.md, "Engine start and shutdown"). 2 GiB holds one request of a 4B model at
# an 8192-token context; a longer one is refused by vLLM when the engine starts (run it from a plan).
ADHOC_KV_CACHE_BYTES = 2 * 2**30
_VLLM_ENGINE: dict[str, object] = {"enforce_eager": True, "kv_cache_memory_bytes": ADHOC_KV_CACHE_BYTES}
ADHOC_BACKEND_SETTINGS: dict[str, tuple[dict[str, object], dict[str, str]]] = {
    "vllm": (_VLLM_ENGINE, {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}),
    # a launched server as the vllm arm's engine, and client threads at twice its max_num_seqs
    "server": ({**_VLLM_ENGINE, "concurrency": 16}, {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}),
}


@dataclass(frozen=True)
class AdhocOptions:
    """The settings `capsule generate` takes for an ad-hoc arm (the rest are fixed above)."""

    name: str
    backend: str
    dtype: str
    batch_size: int
    batch_order: str
    seed: int
    max_new_tokens: int


def adhoc_arm_table(options: AdhocOptions) -> dict[str, Any]:
    """The `[[arms]]` table these options describe: greedy, thinking off, no caps."""
    backend_options, env = ADHOC_BACKEND_SETTINGS.get(options.backend, ({}, {}))
    return {
        "name": options.name,
        "backend": options.backend,
        "subset": ADHOC_SUBSET,
        "dtype": options.dtype,
        "batch_size": options.batch_size,
        "batch_order": options.batch_order,
        "seed": options.seed,
        "max_new_tokens": options.max_new_tokens,
        "thinking": "off",
        "unclosed": "empty",
        "decoding": dict(GREEDY_DECODING),
        "backend_options": dict(backend_options),
        "env": dict(env),
    }


def parse_arm_table(table: Mapping[str, Any], source: str) -> Arm:
    """An `[[arms]]` table read by the plan loader's parser; `source` names it in error messages."""
    return parse_arm(Section(source, f"arm {table.get('name')!r}", dict(table)))


def check_arm(arm: Arm) -> None:
    """Refuse an arm the plan loader would refuse (BadInputError naming the setting)."""
    parse_arm_table(dataclasses.asdict(arm), "arm settings")


def adhoc_record(table: Mapping[str, Any], prompts_sha256: str, keys: Sequence[int]) -> dict[str, Any]:
    """What fixes an ad-hoc run, as `adhoc.json` holds it: the arm table, the prompt file, the keys."""
    return {
        "adhoc_format": ADHOC_FORMAT,
        "arm": dict(table),
        "prompts": {"sha256": prompts_sha256, "keys": [int(k) for k in keys]},
    }


def adhoc_bytes(record: Mapping[str, Any]) -> bytes:
    """`adhoc.json`'s bytes (canonical JSON), whose sha256 is the run's `plan_sha256`."""
    return canonical_json(dict(record))


def adhoc_sha256(record: Mapping[str, Any]) -> str:
    """The sha256 an ad-hoc run records as its `plan_sha256`."""
    return sha256_bytes(adhoc_bytes(record))
