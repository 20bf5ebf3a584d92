"""The standard study of a model card's IFEval claim, as a `Plan`: what `capsule plan new` writes.

One claim arm on all 541 prompts (the verdict reads it), and the standard contrasts on one seeded
subsample: rerun identity, batch size in the model's dtype and in fp32, transformers vs vLLM, seed vs
batch under sampling; each with its paired comparison; then the scorer controls (stability on the
claim arm, sanity on hand-written compliant answers). Every setting is explicit; what a user is
most likely to change (batch size, token budget, subsample size) is a field of `StandardSettings`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from capsule.pins import IFEVAL_PROMPTS_N, IFEVAL_PROMPTS_SHA256
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.metrics import ALL_METRICS, COMPOSITES, METRICS, is_prompt_level
from capsule.prereg.plan import (
    Arm,
    BackendName,
    Claim,
    Comparison,
    Control,
    Decoding,
    DType,
    Model,
    Plan,
    PromptSet,
    Subset,
    VerdictRule,
)

CLAIM_ARM = "claim"
ALL_SUBSET = "all"
CONTRAST_SUBSET = "contrast"
COMPLIANT_FILE = "controls/compliant.jsonl"  # the scorer-sanity answers, relative to the plan directory
MIN_PAIRS = (
    50  # comparisons on fewer common prompts are UNDERPOWERED; the contrast subsample is never smaller
)
PROMPT_ALLOWANCE = 1024  # tokens of context kept for the prompt (IFEval's longest are well under this)
SHORT_DTYPE: dict[str, str] = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
GREEDY = Decoding("greedy", 0.0, 1.0, 0, 0.0, 0.0, 1.0)
SEEDS = (1, 2)  # the seed-vs-batch grid's arm seeds


@dataclass(frozen=True)
class StandardSettings:
    """What the standard plan leaves to the user (all written out in the plan)."""

    dtype: DType  # the model's own dtype (config.json)
    batch_size: int  # the claim arm's, and the larger of each batch contrast
    max_new_tokens: int
    contrast_n: int  # prompts in the contrasts' seeded subsample
    sampling: Decoding  # the seed-vs-batch arms' sampling (the model's generation_config.json)
    context: int | None = None  # the model's context length, when config.json says
    subsample_seed: int = 0

    @property
    def small_batch(self) -> int:
        """The smaller batch size of each batch contrast: a quarter of the claim arm's."""
        return max(1, self.batch_size // 4)


def _options(backend: str, settings: StandardSettings) -> dict[str, object]:
    """Every option of `backend` that has a value to write (its declared defaults), and for vLLM a
    context that holds prompt plus budget."""
    options = {name: o.default for name, o in SPECS[backend].options.items() if o.default is not None}
    if "max_model_len" in SPECS[backend].options:
        wanted = settings.max_new_tokens + PROMPT_ALLOWANCE
        options["max_model_len"] = min(wanted, settings.context) if settings.context else wanted
    return options


def _arm(
    name: str, backend: BackendName, settings: StandardSettings, description: str, **changes: Any
) -> Arm:
    """One arm of the standard plan: `settings`' greedy arm on `backend`, with `changes` (fields of
    `Arm`, checked by `dataclasses.replace`) applied."""
    arm = Arm(
        name=name,
        backend=backend,
        subset=CONTRAST_SUBSET,
        dtype=settings.dtype,
        batch_size=settings.batch_size,
        batch_order="file",
        seed=0,
        max_new_tokens=settings.max_new_tokens,
        thinking="off",
        unclosed="empty",
        decoding=GREEDY,
        backend_options=_options(backend, settings),
        env={},
        description=description,
    )
    return replace(arm, **changes)


def comparison_metric(claim_metric: str) -> str:
    """The per-prompt metric the paired comparisons use: the claim's, or a composite's first member."""
    return claim_metric if claim_metric in METRICS else COMPOSITES[claim_metric][0]


def _contrast_arms(s: StandardSettings) -> tuple[list[Arm], list[Control], list[tuple[str, str, str, str]]]:
    """The contrast arms, their controls, and (name, arm a, arm b, description) of each comparison."""
    d, big, small = SHORT_DTYPE[s.dtype], s.batch_size, s.small_batch
    base = f"vllm-{d}-b{big}"
    arms = [
        _arm(base, "vllm", s, f"vLLM, {s.dtype}, greedy, max_num_seqs {big}: the contrasts' reference."),
        _arm(f"{base}-rerun", "vllm", s, f"{base} again, identical settings (rerun identity)."),
        _arm(f"vllm-{d}-b{small}", "vllm", s, f"{base} at max_num_seqs {small}.", batch_size=small),
        _arm(f"hf-{d}-b{big}", "hf", s, f"{base} under transformers (batch {big})."),
    ]
    controls = [
        Control("rerun", "rerun_identity", (base, f"{base}-rerun")),
        Control(f"batch-{d}", "batch_size", (f"vllm-{d}-b{small}", base)),
        Control("backend", "backend", (f"hf-{d}-b{big}", base)),
    ]
    pairs = [
        ("rerun", base, f"{base}-rerun", "Same settings twice."),
        (f"batch-{d}", f"vllm-{d}-b{small}", base, f"max_num_seqs {small} vs {big} in {s.dtype}."),
        ("hf-vs-vllm", f"hf-{d}-b{big}", base, "Serving stack, identical input ids."),
    ]
    if s.dtype != "float32":
        fp32 = [f"vllm-fp32-b{small}", f"vllm-fp32-b{big}"]
        arms += [
            _arm(
                fp32[0],
                "vllm",
                s,
                f"{base} in float32 at max_num_seqs {small}.",
                dtype="float32",
                batch_size=small,
            ),
            _arm(fp32[1], "vllm", s, f"{base} in float32.", dtype="float32"),
        ]
        controls.append(Control("batch-fp32", "batch_size", (fp32[0], fp32[1])))
        pairs += [
            ("batch-fp32", fp32[0], fp32[1], f"max_num_seqs {small} vs {big} in float32."),
            ("dtype", fp32[1], base, f"float32 vs {s.dtype} at max_num_seqs {big}."),
        ]
    grid = [(seed, batch) for seed in SEEDS for batch in (small, big)]
    names = [f"vllm-sample-s{seed}-b{batch}" for seed, batch in grid]
    for name, (seed, batch) in zip(names, grid, strict=True):
        description = f"Sampling (generation_config), arm seed {seed}, max_num_seqs {batch}."
        arms.append(_arm(name, "vllm", s, description, seed=seed, batch_size=batch, decoding=s.sampling))
    controls.append(Control("seed-vs-batch", "seed_vs_batch", tuple(names)))
    pairs += [
        (f"seed-at-b{small}", names[0], names[2], f"Seed effect at max_num_seqs {small}."),
        (f"seed-at-b{big}", names[1], names[3], f"Seed effect at max_num_seqs {big}."),
        (f"batch-at-s{SEEDS[0]}", names[0], names[1], "Batch effect at a fixed per-request seed."),
    ]
    return arms, controls, pairs


def standard_plan(name: str, model: Model, claim: Claim, settings: StandardSettings, path: Path) -> Plan:
    """The standard plan for `claim` about `model` (validate it with `capsule.prereg.loader`)."""
    claim_arm = _arm(
        CLAIM_ARM,
        "vllm",
        settings,
        f"The claim arm: vLLM, {settings.dtype}, greedy, all {IFEVAL_PROMPTS_N} prompts, "
        f"{settings.max_new_tokens} new tokens, max_num_seqs {settings.batch_size}.",
        subset=ALL_SUBSET,
    )
    arms, controls, pairs = _contrast_arms(settings)
    metric = comparison_metric(claim.metric)
    controls += [
        Control(
            "scorer-stability",
            "scorer_stability",
            (CLAIM_ARM,),
            k=10,
            description="Score the claim arm 10 more times unseeded: the official scorer's own spread.",
        ),
        Control(
            "scorer-sanity",
            "scorer_sanity",
            (),
            compliant=COMPLIANT_FILE,
            description="Hand-written answers that follow every instruction of their prompt score 100%.",
        ),
    ]
    return Plan(
        name=name,
        description=f"{model.name} on the {IFEVAL_PROMPTS_N} IFEval prompts: the claim arm and the "
        "standard contrasts (written by `capsule plan new`).",
        path=path,
        amends="",
        amend_reason="",
        model=model,
        claim=claim,
        prompts=PromptSet(
            IFEVAL_PROMPTS_SHA256,
            {
                ALL_SUBSET: Subset(ALL_SUBSET, "all"),
                CONTRAST_SUBSET: Subset(
                    CONTRAST_SUBSET, "seeded_sample", settings.contrast_n, settings.subsample_seed
                ),
            },
        ),
        scorer_seed=0,
        arms=(claim_arm, *arms),
        controls=tuple(controls),
        comparisons=tuple(Comparison(n, (a, b), metric, 0.95, text) for n, a, b, text in pairs),
        verdict=VerdictRule(
            arm=CLAIM_ARM,
            metric=claim.metric,
            interval="clopper_pearson" if is_prompt_level(claim.metric) else "bootstrap",
            confidence=0.95,
            min_n=IFEVAL_PROMPTS_N,
            bootstrap_resamples=10000,
            bootstrap_seed=0,
            min_pairs=MIN_PAIRS,
        ),
    )


def other_readings(metric: str) -> tuple[str, ...]:
    """Every metric but the claim's reading: the report always shows them beside it."""
    return tuple(m for m in ALL_METRICS if m != metric)
