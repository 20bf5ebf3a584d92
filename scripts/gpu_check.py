"""The GPU check's work (scripts/gpu_check.sh runs it): a small stand-in model built from a config
with random weights from a fixed seed (no weights travel), generated through the capsule's own
transformers backend in bf16 at batch 1, 8 and 16 on length-sorted batches and again at 16 (rerun
identity); then a real manifest of this machine (`capsule manifest --import-torch`) and
`capsule manifest diff` against the H200 fixture. Writes OUT/gpu_check.json, OUT/manifest.json and
OUT/manifest-diff.txt and prints one summary line. `--device cpu` runs the same path without CUDA
(the unit test does, with a tiny model), so only the CUDA kernels are new on a GPU.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "manifests" / "examples" / "h200-fixture.json"
SEED = 0
EOS = 2


def stand_in_model(directory: Path, layers: int, width: int, vocab: int) -> None:
    """A Qwen3-architecture causal LM with random weights (torch seed 0), saved as safetensors."""
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(SEED)
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=width,
        intermediate_size=width * 3,
        num_hidden_layers=layers,
        num_attention_heads=max(1, width // 64),
        num_key_value_heads=max(1, width // 128),
        head_dim=64,
        max_position_embeddings=4096,
        eos_token_id=EOS,
        bos_token_id=1,
        pad_token_id=0,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
    )
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(directory, safe_serialization=True)
    GenerationConfig(eos_token_id=EOS, pad_token_id=0, bos_token_id=1).save_pretrained(directory)


def prompts(n: int, vocab: int) -> dict[int, tuple[int, ...]]:
    """`n` prompts of random token ids with lengths from 8 to 256, from a fixed seed."""
    rng = random.Random(SEED)
    return {key: tuple(rng.randrange(10, vocab) for _ in range(rng.randint(8, 256))) for key in range(n)}


def generate(
    backend: object, inputs: dict[int, tuple[int, ...]], batch: int, tokens: int
) -> tuple[dict, float]:
    """Every prompt at `batch`, length-sorted batches (the capsule's rule); generated ids per key, seconds."""
    from capsule.generation.backends import Request
    from capsule.generation.batching import form_batches
    from capsule.prereg.plan import Decoding

    greedy = Decoding("greedy", 0.0, 1.0, 0, 0.0, 0.0, 1.0)
    out: dict[int, tuple[int, ...]] = {}
    start = time.perf_counter()
    for b in form_batches(list(inputs), {k: len(v) for k, v in inputs.items()}, batch, "length"):
        requests = [Request(k, inputs[k]) for k in b.keys]
        for key, done in zip(
            b.keys, backend.generate(requests, greedy, tokens, [0] * len(requests)), strict=True
        ):  # type: ignore[attr-defined]
            out[key] = done.token_ids
    return out, time.perf_counter() - start


def contrast(a: dict, b: dict) -> dict:
    """Identical rows, and the median first divergent token index of the others."""
    firsts = [
        next(
            (i for i, (x, y) in enumerate(zip(a[k], b[k], strict=False)) if x != y), min(len(a[k]), len(b[k]))
        )
        for k in a
        if a[k] != b[k]
    ]
    return {
        "identical": sum(a[k] == b[k] for k in a),
        "of": len(a),
        "median_first_divergence": statistics.median(firsts) if firsts else None,
    }


def capsule_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "capsule", *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=8192)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    from capsule.generation.backends.hf import HFBackend
    from capsule.prereg.plan import Arm, Decoding

    arm = Arm(
        "gpu-check",
        "hf",
        "all",
        "bfloat16",
        16,
        "length",
        SEED,
        args.tokens,
        "off",
        "empty",
        Decoding("greedy", 0.0, 1.0, 0, 0.0, 0.0, 1.0),
        {"device": args.device},
        {},
    )
    inputs = prompts(args.prompts, args.vocab)
    with tempfile.TemporaryDirectory() as tmp:
        stand_in_model(Path(tmp), args.layers, args.width, args.vocab)
        backend = HFBackend(Path(tmp), arm)
        runs, seconds = {}, {}
        for label, batch in (("b1", 1), ("b8", 8), ("b16", 16), ("b16-rerun", 16)):
            runs[label], seconds[label] = generate(backend, inputs, batch, args.tokens)
        described = backend.describe()
        backend.close()
    result = {
        "model": f"Qwen3ForCausalLM stand-in, {args.layers} layers x {args.width}, vocab {args.vocab}, "
        f"random init seed {SEED}, bf16",
        "prompts": args.prompts,
        "max_new_tokens": args.tokens,
        "batch_order": "length",
        "device": described["device"],
        "versions": described["versions"],
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "tokens": {k: sum(len(t) for t in v.values()) for k, v in runs.items()},
        "contrasts": {
            "b8-vs-b1": contrast(runs["b8"], runs["b1"]),
            "b16-vs-b1": contrast(runs["b16"], runs["b1"]),
            "b16-vs-b8": contrast(runs["b16"], runs["b8"]),
            "rerun-b16": contrast(runs["b16"], runs["b16-rerun"]),
        },
    }
    manifest = args.out / "manifest.json"
    made = capsule_cli("manifest", "--import-torch", "--out", str(manifest))
    if made.returncode != 0:
        print(f"Error: capsule manifest failed: {made.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return 3
    diff = capsule_cli("manifest", "diff", str(manifest), str(FIXTURE), "--json")
    (args.out / "manifest-diff.txt").write_text(
        capsule_cli("manifest", "diff", str(manifest), str(FIXTURE)).stdout
    )
    counts = json.loads(diff.stdout)["counts"] if diff.returncode == 0 else {"error": diff.stderr.strip()}
    gpus = json.loads(manifest.read_text()).get("gpus", [])
    result["manifest"] = {"gpus": [g.get("name") for g in gpus], "diff_vs_h200_fixture": counts}
    (args.out / "gpu_check.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    c = result["contrasts"]
    rate = {k: round(result["tokens"][k] / max(s, 1e-9)) for k, s in seconds.items()}
    gpus_named = result["manifest"]["gpus"]
    print(
        f"gpu_check on {described['device']} ({', '.join(map(str, gpus_named)) or 'no NVML GPU'}): "
        f"bf16 length-sorted, {args.prompts} prompts x {args.tokens} tokens, identical rows "
        f"b8/b1 {c['b8-vs-b1']['identical']}, b16/b1 {c['b16-vs-b1']['identical']}, "
        f"b16/b8 {c['b16-vs-b8']['identical']}, rerun b16 {c['rerun-b16']['identical']} of {args.prompts}; "
        f"tok/s {rate}; manifest diff vs the H200 fixture: {counts}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
