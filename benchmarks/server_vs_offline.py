"""The server backend against offline vLLM on the same prompts: throughput, and what a rerun changes.

For each dtype, one arm runs under offline vLLM (`vllm.LLM`, max_num_seqs = batch) and then the
same settings under a launched vLLM server (max_num_seqs = batch) fed by `--concurrency` client
threads, run twice on the same server (the server rerun). Printed side by side: generated tokens
per second of each (offline: first submission to last finish; server: first send to last finish,
from the rows' request timestamps, excluding the server's start and the determinism probe), their
ratio, and how many responses are byte-identical server vs offline and server vs its rerun.
Greedy, the embedded model, the first N IFEval prompts; read ratios, not absolute speed, on a shared
machine. Quote the CPU's ISA (printed) beside any figure.

    .venv/bin/python benchmarks/server_vs_offline.py --prompts 16 --max-new-tokens 64 --dtypes float32
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

ENV = {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
ENGINE = {"enforce_eager": True, "gpu_memory_utilization": 0.3, "max_model_len": 2048}


def cpu_isa() -> str:
    """The CPU model and the ISA flags that change kernels (AVX-512, bf16, AMX)."""
    model, flags = "unknown", set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name") and model == "unknown":
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags |= set(line.split(":", 1)[1].split())
    wanted = sorted(f for f in flags if f.startswith(("avx512", "amx")) or f in ("avx2", "fma"))
    return f"{model}; {' '.join(wanted)}"


def run_arm(
    arm: Any, prompts: Any, keys: list[int], model_dir: Path, out: Path, backend: Any,
) -> list[dict[str, Any]]:
    from capsule.generation.arm_runner import generate_arm

    result = generate_arm(
        arm, prompts=prompts, keys=keys, model_dir=model_dir, out_dir=out, plan_hash="b" * 64,
        manifest_digest="m" * 64, backend=backend, progress=False,
    )  # fmt: skip
    return [json.loads(line) for line in result.rows_path.read_text().splitlines()]


def tokens_per_s(rows: list[dict[str, Any]]) -> float:
    """Generated tokens over the arm's generation wall time (see the module docstring)."""
    tokens = sum(r["n_output_tokens"] for r in rows)
    if "request" in rows[0]:
        wall = max(r["request"]["finished_at"] for r in rows) - min(r["request"]["sent_at"] for r in rows)
    else:
        wall = max(r["elapsed_s"] for r in rows)
    return float(tokens / wall)


def identical(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> int:
    by_key = {r["key"]: r["raw"] for r in b}
    return sum(by_key.get(r["key"]) == r["raw"] for r in a)


def measure(
    dtype: str, args: argparse.Namespace, model_dir: Path, prompts: Any, keys: list[int],
) -> dict[str, Any]:
    from dataclasses import replace

    from capsule.generation.backends import load_backend
    from capsule.prereg.adhoc import AdhocOptions, adhoc_arm_table, parse_arm_table

    base = parse_arm_table(
        adhoc_arm_table(AdhocOptions("offline", "vllm", dtype, args.batch, "file", 0, args.max_new_tokens)),
        "benchmark",
    )
    offline = replace(base, backend_options=dict(ENGINE), env=dict(ENV))
    served = replace(offline, name="server", backend="server",
                     backend_options={**ENGINE, "concurrency": args.concurrency})  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        root = Path(tmp)
        engine = load_backend("vllm", model_dir, offline)
        try:
            offline_rows = run_arm(offline, prompts, keys, model_dir, root / "offline", engine)
        finally:
            engine.close()
        server = load_backend("server", model_dir, served)
        try:
            first = run_arm(served, prompts, keys, model_dir, root / "server", server)
            again = replace(served, name="server-rerun")
            rerun = run_arm(again, prompts, keys, model_dir, root / "server", server)
        finally:
            server.close()
    assert [r["input_ids_sha256"] for r in sorted(first, key=lambda r: r["key"])] == [
        r["input_ids_sha256"] for r in sorted(offline_rows, key=lambda r: r["key"])
    ], "the server and offline vLLM received different input ids"
    return {
        "dtype": dtype,
        "offline": tokens_per_s(offline_rows),
        "server": tokens_per_s(first),
        "server_rerun": tokens_per_s(rerun),
        "same_as_offline": identical(first, offline_rows),
        "same_as_rerun": identical(first, rerun),
        "n": len(keys),
        "max_in_flight": max(r["request"]["in_flight_at_send"] + 1 for r in first),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4, help="max_num_seqs of both engines")
    parser.add_argument("--concurrency", type=int, default=8, help="server client threads")
    parser.add_argument("--dtypes", nargs="+", default=["float32"])
    args = parser.parse_args()

    from capsule.artifacts.embedded_model import fetch_model
    from capsule.artifacts.pinned_prompts import fetch_prompts
    from ifeval_scorer import load_prompts

    model_dir = fetch_model()[0]
    prompts = load_prompts(fetch_prompts().path)
    keys = list(prompts)[: args.prompts]
    print(f"CPU: {cpu_isa()}")
    print(f"{args.prompts} prompts x {args.max_new_tokens} tokens, greedy, max_num_seqs {args.batch}, "
          f"{args.concurrency} server clients")  # fmt: skip
    print("| dtype | offline tok/s | server tok/s | server/offline | rerun tok/s | server = offline | "
          "server = rerun | max in flight |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for dtype in args.dtypes:
        m = measure(dtype, args, model_dir, prompts, keys)
        print(
            f"| {m['dtype']} | {m['offline']:.1f} | {m['server']:.1f} | {m['server'] / m['offline']:.2f} | "
            f"{m['server_rerun']:.1f} | {m['same_as_offline']}/{m['n']} | {m['same_as_rerun']}/{m['n']} | "
            f"{m['max_in_flight']} |"
        )


if __name__ == "__main__":  # vLLM starts its engine with multiprocessing: the guard is required
    main()
