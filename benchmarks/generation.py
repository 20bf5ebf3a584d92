"""Generation throughput, hf vs vLLM at batch sizes 1, 8 and 32, and the capsule's overhead.

For each (backend, batch size) one loaded model serves both measurements, back to back on the same
prompts and the same batches: the backend's raw API (transformers `model.generate` on left-padded
token ids; `vllm.LLM.generate` on prompt token ids) and `capsule.generation.arm_runner.generate_arm` (chat
rendering, batching, per-row hashing, decoding, fsynced JSONL, meta). Overhead = capsule time / raw
time - 1 (goal: under 3%). Greedy bf16. The machine may be shared: read ratios, not absolute speed.

    .venv/bin/python benchmarks/generation.py --prompts 32 --max-new-tokens 32
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any


def raw_hf(backend: Any, batches: list[list[list[int]]], max_new: int) -> tuple[float, int]:
    """transformers directly: left-pad each batch, greedy generate, count tokens up to the stop id."""
    import torch

    model, pad, stops = backend.model, backend.pad_id, backend.stop_ids
    tokens, start = 0, time.perf_counter()
    for batch in batches:
        width = max(map(len, batch))
        ids = torch.tensor([[pad] * (width - len(b)) + b for b in batch])
        mask = torch.tensor([[0] * (width - len(b)) + [1] * len(b) for b in batch])
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max_new,
                do_sample=False,
                eos_token_id=stops,
                pad_token_id=pad,
            )
        for row in out[:, width:].tolist():
            cut = next((j for j, t in enumerate(row) if t in stops), None)
            tokens += len(row) if cut is None else cut + 1
    return time.perf_counter() - start, tokens


def raw_vllm(backend: Any, batches: list[list[list[int]]], max_new: int) -> tuple[float, int]:
    """vLLM directly: every prompt at once as token ids, greedy, no detokenization."""
    from vllm import SamplingParams

    params = SamplingParams(
        temperature=0.0, max_tokens=max_new, stop_token_ids=backend.stop_ids, detokenize=False
    )
    prompts = [{"prompt_token_ids": ids} for batch in batches for ids in batch]
    start = time.perf_counter()
    outputs = backend.llm.generate(prompts, params, use_tqdm=False)
    return time.perf_counter() - start, sum(len(o.outputs[0].token_ids) for o in outputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-sizes", default="1,8,32")
    parser.add_argument("--backends", default="hf,vllm")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved raw/capsule pairs; best of each")
    args = parser.parse_args()
    from capsule.generation.arm_runner import generate_arm
    from capsule.generation.backends import load_backend
    from capsule.generation.batching import form_batches
    from capsule.generation.chat import load_chat_tokenizer
    from capsule.generation.targets import adhoc_target
    from capsule.prereg.adhoc import AdhocOptions

    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; greedy bf16, "
        f"{args.prompts} prompts x {args.max_new_tokens} new tokens"
    )
    print(
        f"{'backend':8} {'batch':>5} {'raw tok/s':>10} {'capsule tok/s':>14} {'raw s':>8} {'capsule s':>10} "
        f"{'overhead':>9} {'load s':>7}"
    )
    for kind in args.backends.split(","):
        for size in (int(s) for s in args.batch_sizes.split(",")):
            options = AdhocOptions(f"{kind}{size}", kind, "bfloat16", size, "file", 0, args.max_new_tokens)
            target = adhoc_target(options, None, args.prompts, None, dry_run=False)
            arm, keys, prompts, plan_hash = target.arm, target.keys, target.prompts, target.plan_sha256
            assert target.model_dir is not None
            model_dir = target.model_dir
            tokenizer = load_chat_tokenizer(model_dir)
            inputs = {k: tokenizer.render(prompts[k].prompt, "off") for k in keys}
            batches = [[inputs[k] for k in b.keys] for b in form_batches(keys, {}, size, "file")]
            start = time.perf_counter()
            backend = load_backend(kind, model_dir, arm)
            load_s = time.perf_counter() - start
            raw = raw_hf if kind == "hf" else raw_vllm
            raw(backend, batches[:1], 2)  # warm-up on a tiny job
            raw_s = cap_s = float("inf")
            for _ in range(args.repeats):  # interleaved, best of each: a shared machine's load shifts
                seconds, raw_tokens = raw(backend, batches, args.max_new_tokens)
                raw_s = min(raw_s, seconds)
                with tempfile.TemporaryDirectory() as out:
                    start = time.perf_counter()  # the whole call: rendering, batching, rows, fsync, meta
                    result = generate_arm(arm, prompts=prompts, keys=keys, model_dir=model_dir,
                                          out_dir=Path(out), plan_hash=plan_hash, manifest_digest="",
                                          backend=backend, progress=False, tokenizer=tokenizer)
                    cap_s = min(cap_s, time.perf_counter() - start)
            backend.close()
            print(
                f"{kind:8} {size:>5} {raw_tokens / raw_s:>10.1f} {result.new_tokens / cap_s:>14.1f} "
                f"{raw_s:>8.1f} "
                f"{cap_s:>10.1f} {cap_s / raw_s - 1:>+9.1%} {load_s:>7.1f}",
                flush=True,
            )
            if raw_tokens != result.new_tokens:
                print(f"  note: token counts differ (raw {raw_tokens}, capsule {result.new_tokens})")


if __name__ == "__main__":  # vLLM starts its engine with multiprocessing: scripts need this guard
    main()
