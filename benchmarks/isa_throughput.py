"""transformers throughput of the embedded model in one static batch, to compare dtypes and ISA limits.

Run it twice, with and without an ISA limit, to approximate a CPU without bf16 instructions on one
that has them (the limit applies to oneDNN and to ATen's own kernels):

    .venv/bin/python benchmarks/isa_throughput.py bf16 16 16
    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 .venv/bin/python benchmarks/isa_throughput.py bf16 16 16

Arguments: dtype (bf16 | fp32), batch (the first N IFEval prompts), steps (new tokens, forced with
min_new_tokens). Prints one JSON line: wall and process CPU seconds, token slots per second, the
ISA variables and the capability torch reports. On a shared machine compare ratios of runs made
side by side, not absolute figures.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from capsule.artifacts.embedded_model import model_cache_dir
from capsule.artifacts.pinned_prompts import prompts_cache_path

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
ISA_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")


def main(dtype_name: str, batch: int, steps: int) -> dict[str, object]:
    """Generate `steps` tokens for the first `batch` prompts in one left-padded batch; time it."""
    model_dir = str(model_cache_dir())
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    with open(prompts_cache_path(), encoding="utf-8") as handle:
        prompts = [json.loads(line)["prompt"] for line, _ in zip(handle, range(batch), strict=False)]
    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
        for prompt in prompts
    ]
    inputs = tokenizer(texts, return_tensors="pt", padding=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=DTYPES[dtype_name]).eval()
    torch.set_num_threads(2)
    with torch.inference_mode():
        model.generate(**inputs, max_new_tokens=2, do_sample=False)  # warm-up
        wall, cpu = time.perf_counter(), time.process_time()
        out = model.generate(**inputs, max_new_tokens=steps, min_new_tokens=steps, do_sample=False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    slots = out.shape[0] * steps
    return {
        "dtype": dtype_name, "batch": batch, "steps": steps, "slots": slots, "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1), "slots_per_s": round(slots / wall, 1),
        "isa_env": {name: os.environ.get(name) for name in ISA_VARIABLES},
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
