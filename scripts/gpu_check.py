"""The GPU check's work (scripts/gpu_check.sh runs it): a small stand-in model built from a config
with random weights from a fixed seed (no weights travel), generated through the capsule's own
transformers backend in bf16 at batch 1, 8 and 16 on length-sorted batches and again at 16 (rerun
identity); then the sampled path of the GPU plan's runs 3a/3b (T 0.85, top_p 0.95, top_k 20, presence
penalty 1.1, per-row seeds `request_seed(0, key)`) at batch 16, again at 16, and at 8; then one
sampling step's draws from the device's probabilities against the same draws from their CPU copy;
then a real manifest of this machine (`capsule manifest --import-torch`) and
`capsule manifest diff` against the H200 fixture. Writes OUT/gpu_check.json, OUT/manifest.json and
OUT/manifest-diff.txt and prints one summary line. `--device cpu` runs the same path without CUDA
(the unit test does, with a tiny model), so only the CUDA kernels are new on a GPU.

What it expects of a GPU: every run finishes (before the device-correct sampler, the sampled runs
raised "Expected a 'cuda' device type for generator but found 'cpu'" at their first token); the
sampled b16 rerun is identical to b16 (same batch, same kernels, same per-row streams), as the greedy
rerun is; sampled b8 against b16 may differ (batch numerics, the study's subject); and
`draws_device_vs_cpu` is all of them identical (a row's draw depends on its probabilities and its CPU
generator only, not on the device they sit on). Any other outcome is a finding to report.
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


GREEDY = ("greedy", 0.0, 1.0, 0, 0.0, 0.0, 1.0)
CARD = ("sample", 0.85, 0.95, 20, 0.0, 1.1, 1.0)  # prereg/agents-a1-4b-v3 runs 3a/3b


def generate(
    backend: object, inputs: dict[int, tuple[int, ...]], batch: int, tokens: int, decoding: tuple = GREEDY
) -> tuple[dict, float]:
    """Every prompt at `batch`, length-sorted batches (the capsule's rule); generated ids per key, seconds.
    Sampled decoding uses each row's own seed, `request_seed(SEED, key)`, as an arm does."""
    from capsule.generation.backends import Request
    from capsule.generation.batching import form_batches, request_seed
    from capsule.prereg.plan import Decoding

    chosen = Decoding(*decoding)
    out: dict[int, tuple[int, ...]] = {}
    start = time.perf_counter()
    for b in form_batches(list(inputs), {k: len(v) for k, v in inputs.items()}, batch, "length"):
        requests = [Request(k, inputs[k]) for k in b.keys]
        seeds = [request_seed(SEED, k) if chosen.mode == "sample" else 0 for k in b.keys]
        for key, done in zip(
            b.keys, backend.generate(requests, chosen, tokens, seeds), strict=True
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


def draws_device_vs_cpu(device: str, vocab: int, rows: int = 64) -> dict:
    """One sampling step's draws (the card's top_k) from probabilities on `device` and from their CPU
    copy, each with a fresh generator of the same seed: how many of `rows` agree (expected: all)."""
    import torch

    from capsule.generation.backends.hf_sampling import draw, support

    probs = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(SEED)).softmax(-1).to(device)
    same = sum(
        draw(*support(probs[row], CARD[3]), torch.Generator().manual_seed(row))
        == draw(*support(probs[row].cpu(), CARD[3]), torch.Generator().manual_seed(row))
        for row in range(rows)
    )
    return {"identical": same, "of": rows}


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
        for label, batch in (("sampled-b16", 16), ("sampled-b16-rerun", 16), ("sampled-b8", 8)):
            runs[label], seconds[label] = generate(backend, inputs, batch, args.tokens, CARD)
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
            "sampled-rerun-b16": contrast(runs["sampled-b16"], runs["sampled-b16-rerun"]),
            "sampled-b8-vs-b16": contrast(runs["sampled-b8"], runs["sampled-b16"]),
        },
        "sampling": "T 0.85, top_p 0.95, top_k 20, presence 1.1 (agents-a1-4b-v3 runs 3a/3b), per-row seeds",
        "draws_device_vs_cpu": draws_device_vs_cpu(args.device, args.vocab),
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
        f"sampled (the card's settings) rerun b16 {c['sampled-rerun-b16']['identical']} (expected "
        f"{args.prompts}), b8/b16 {c['sampled-b8-vs-b16']['identical']} of {args.prompts}; draws on "
        f"{args.device} vs CPU {result['draws_device_vs_cpu']['identical']} of "
        f"{result['draws_device_vs_cpu']['of']} identical (expected all); "
        f"tok/s {rate}; manifest diff vs the H200 fixture: {counts}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
