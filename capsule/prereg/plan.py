"""A study's pre-registered plan: frozen dataclasses parsed from `prereg/<study>/plan.toml`.

Every setting that can change a result (seed, dtype, sampling knobs, max_new_tokens, batch size,
thinking, unclosed policy, backend, model checksums, prompt hash and subsample rule) is required in
the TOML; only bookkeeping (descriptions, cost caps) may be omitted. The loader and its validation
live in `capsule.prereg.loader`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

BackendName = Literal["hf", "vllm", "server", "fake"]
Thinking = Literal["on", "off"]
Unclosed = Literal["empty", "raw"]
BatchOrder = Literal["file", "length"]
DType = Literal["bfloat16", "float16", "float32"]
DecodingMode = Literal["greedy", "sample"]
# each choice's values, once: the tuples a plan's text is checked against (`Section.choice`)
BACKEND_NAMES: tuple[BackendName, ...] = get_args(BackendName)
THINKING: tuple[Thinking, ...] = get_args(Thinking)
UNCLOSED: tuple[Unclosed, ...] = get_args(Unclosed)
BATCH_ORDERS: tuple[BatchOrder, ...] = get_args(BatchOrder)
DTYPES: tuple[DType, ...] = get_args(DType)
DECODING_MODES: tuple[DecodingMode, ...] = get_args(DecodingMode)


@dataclass(frozen=True)
class Model:
    """The model under test, pinned by checksum. `source` is "embedded", "hub" or "path"."""

    name: str
    source: str
    files: dict[str, str]  # relative file path -> sha256 (the files that determine outputs)
    repo: str = ""  # Hub repo id (source "hub")
    revision: str = ""  # Hub commit (source "hub")
    loader: str = "causal_lm"  # transformers auto class: "causal_lm" | "image_text_to_text"


@dataclass(frozen=True)
class Claim:
    """The model card's claim: its value, in percent, and how the plan reads the card's metric."""

    text: str
    value: float
    metric: str  # a name from `capsule.prereg.metrics` ("prompt_level_strict_acc", "card_avg_strict", ...)
    other_readings: tuple[str, ...]  # other plausible readings, always reported
    source: str


@dataclass(frozen=True)
class Subset:
    """A named prompt subset: "all" prompts, the "first" n in file order, or a "seeded_sample"."""

    name: str
    rule: str
    n: int = 0
    seed: int = 0


@dataclass(frozen=True)
class PromptSet:
    """The pinned prompt file and the subsets arms draw from."""

    sha256: str
    subsets: dict[str, Subset]


@dataclass(frozen=True)
class Decoding:
    """Decoding knobs. `mode` "greedy" ignores the sampling knobs; all are required to be explicit."""

    mode: DecodingMode
    temperature: float
    top_p: float
    top_k: int  # 0 or -1 disables
    min_p: float
    presence_penalty: float  # additive, over generated tokens only (vLLM / OpenAI semantics)
    repetition_penalty: float  # multiplicative, 1.0 disables


@dataclass(frozen=True)
class Arm:
    """One generation setting, run on one prompt subset by one backend."""

    name: str
    backend: BackendName
    subset: str
    dtype: DType
    batch_size: int
    batch_order: BatchOrder
    seed: int  # per-request seeds derive from (seed, prompt key); also orders batch execution
    max_new_tokens: int
    thinking: Thinking
    unclosed: Unclosed
    decoding: Decoding
    backend_options: dict[str, object] = field(default_factory=dict)  # e.g. vLLM gpu_memory_utilization
    env: dict[str, str] = field(default_factory=dict)  # numerics env vars, e.g. VLLM_BATCH_INVARIANT
    max_prompts: int = 0  # cost cap, 0 = none; a capped arm is marked partial
    max_wall_minutes: float = 0.0  # cost cap, 0 = none
    description: str = ""
    hardware: str = ""  # a Ray node resource a lane on a cluster must have to run it ("": any node)


@dataclass(frozen=True)
class Control:
    """A control: `kind` names a row of `capsule.prereg.control_kinds.KINDS`. `arms` names the arms it
    reads; `k` is the unseeded repetitions for scorer_stability; `compliant` is a path (relative to
    the plan directory) of hand-written compliant answers."""

    name: str
    kind: str
    arms: tuple[str, ...]
    k: int = 10
    compliant: str = ""
    description: str = ""


@dataclass(frozen=True)
class Comparison:
    """A paired comparison of two arms on their common prompts, with its metric and interval level."""

    name: str
    arms: tuple[str, str]
    metric: str
    confidence: float
    description: str = ""


@dataclass(frozen=True)
class VerdictRule:
    """How the headline verdict is read: claim inside the arm's interval of `metric` -> REPRODUCED,
    outside -> NOT REPRODUCED, fewer than `min_n` prompts -> UNDERPOWERED."""

    arm: str
    metric: str
    interval: str  # "wilson" | "clopper_pearson" | "bootstrap"
    confidence: float
    min_n: int
    bootstrap_resamples: int
    bootstrap_seed: int
    min_pairs: int  # paired comparisons with fewer discordant-or-not pairs are UNDERPOWERED


@dataclass(frozen=True)
class Plan:
    """A whole pre-registered study."""

    name: str
    description: str
    path: Path
    amends: str  # "" or the path of the plan this one amends
    amend_reason: str
    model: Model
    claim: Claim
    prompts: PromptSet
    scorer_seed: int
    arms: tuple[Arm, ...]
    controls: tuple[Control, ...]
    comparisons: tuple[Comparison, ...]
    verdict: VerdictRule
    signers: tuple[str, ...] = ()  # [evidence] signers: fingerprints of the keys allowed to sign its runs

    def arm(self, name: str) -> Arm:
        """The arm called `name` (KeyError if the plan has none: the loader checks references)."""
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise KeyError(name)


#: Arm fields added after runs were committed, at their default: an arm's record leaves them out
#: there, so the records (and identities) of runs made before them stand.
LATER_ARM_FIELDS: dict[str, object] = {"hardware": ""}


def arm_record(arm: Arm) -> dict[str, object]:
    """The arm as plain JSON-able data, the fields of `LATER_ARM_FIELDS` left out at their default."""
    record = dataclasses.asdict(arm)
    return {key: value for key, value in record.items()
            if key not in LATER_ARM_FIELDS or value != LATER_ARM_FIELDS[key]}
