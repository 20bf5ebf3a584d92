"""The throughput figures a CPU device entry of `capsule/costing/throughput.toml` needs, measured here.

For each backend, dtype and batch size the embedded plan uses, one ad-hoc `capsule generate` run of
the embedded model (greedy, the first N IFEval prompts, 64 new tokens: the s64 arms' budget), each
in its own process so no engine outlives its figure. A figure is generated tokens / the arm's
`elapsed_s` (model loading excluded), the way the committed table's measured figures are read.
Prints one `[[devices.figures]]` stanza per figure, to paste into the table with the date and CPU.

    flock /tmp/capsule-heavy.lock .venv/bin/python benchmarks/cpu_figures.py [NAME ...]

NAMEs (`vllm-float32-b1`, `hf-bfloat16-b48`, ...) measure only those figures (default: all).

Takes about 6 minutes on 2 cores; on a shared machine the figures are as noisy as the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (backend, dtype, batch, prompts): batch 1 on fewer prompts (it is slow and its rate is per step)
FIGURES = (
    ("vllm", "float32", 1, 4),
    ("vllm", "float32", 48, 48),
    ("vllm", "bfloat16", 1, 4),
    ("vllm", "bfloat16", 48, 48),
    ("hf", "float32", 16, 16),
    ("hf", "float32", 48, 48),
    ("hf", "bfloat16", 16, 16),
    ("hf", "bfloat16", 48, 48),
)
TOKENS = 64


def measure(capsule: str, backend: str, dtype: str, batch: int, prompts: int, out: Path) -> dict[str, float]:
    """One ad-hoc arm; its generated tokens and generation seconds, from its rows and meta sidecar."""
    name = f"{backend}-{dtype}-b{batch}"
    started = time.perf_counter()
    subprocess.run(
        [
            capsule, "generate", "--backend", backend, "--dtype", dtype, "--batch-size", str(batch),
            "--max-new-tokens", str(TOKENS), "--first", str(prompts), "--name", name,
            "--out", str(out / name), "--no-progress",
        ],
        check=True,
    )
    wall = time.perf_counter() - started
    generations = out / name / "generations"
    meta = json.loads((generations / f"{name}.meta.json").read_text())
    rows = [json.loads(line) for line in (generations / f"{name}.jsonl").read_text().splitlines() if line]
    tokens = sum(int(row["n_output_tokens"]) for row in rows)
    return {"tokens": tokens, "elapsed_s": float(meta["elapsed_s"]), "process_s": wall}


def main(only: list[str]) -> None:
    """Measure every figure (or those named in `only`) and print the stanzas."""
    capsule = str(Path(sys.executable).with_name("capsule"))
    day = time.strftime("%Y-%m-%d", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="capsule-cpu-figures-") as scratch:
        for backend, dtype, batch, prompts in FIGURES:
            if only and f"{backend}-{dtype}-b{batch}" not in only:
                continue
            got = measure(capsule, backend, dtype, batch, prompts, Path(scratch))
            rate = got["tokens"] / got["elapsed_s"]
            print(
                f"[[devices.figures]]\nbackend = \"{backend}\"\ndtype = \"{dtype}\"\nbatch = {batch}\n"
                f"tok_per_s = {rate:.1f}\nsource = \"measured: benchmarks/cpu_figures.py, {day}, "
                f"{prompts} prompts x {TOKENS} tokens, {got['tokens']:,} tokens in {got['elapsed_s']:.1f} s "
                f"(process {got['process_s']:.0f} s, start included)\"",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
