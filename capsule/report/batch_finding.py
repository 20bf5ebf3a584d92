"""The batch finding in one sentence: how many responses and pass/fail verdicts batch size changed,
per dtype and backend, from the plan's batch_size controls (for the README headline and RESULTS.md).

"In bf16, batch size changed 29 of 64 responses and 3 pass/fail verdicts under vllm (max_num_seqs 1
vs 48) ...; in fp32, none: 0 of 128 responses and 0 verdicts." Each pair's numbers come from its
control section in analysis.json (responses: scored responses that differ on the common prompts;
verdicts: discordant prompts b + c of the pair's paired test), so `capsule check-numbers` re-renders
the sentence and catches any figure that drifts.
"""

from __future__ import annotations

from dataclasses import dataclass

from capsule.analysis.control_schema import ContrastPair, ContrastSection
from capsule.analysis.schema import Analysis
from capsule.prereg.backend_specs import SPECS
from capsule.report.report_input import ReportInput

BATCH_SIZE_KIND = "batch_size"
DTYPE_WORDS = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


@dataclass(frozen=True)
class BatchEffect:
    """One batch-size pair: its dtype and backend, batch sizes, responses and verdicts changed."""

    dtype: str
    backend: str
    batch_sizes: tuple[int, int]
    n: int
    responses_changed: int
    verdicts_changed: int


def batch_effects(analysis: Analysis) -> list[BatchEffect]:
    """Every pair of every batch_size control whose two arms share dtype and backend, in plan order."""
    effects: list[BatchEffect] = []
    for section in analysis.controls.values():
        if not isinstance(section, ContrastSection) or section.kind != BATCH_SIZE_KIND:
            continue
        for pair in section.pairs:
            effect = _effect(pair)
            if effect is not None:
                effects.append(effect)
    return effects


def _effect(pair: ContrastPair) -> BatchEffect | None:
    settings = [pair.settings[arm] for arm in pair.arms if arm in pair.settings]
    if len(settings) != 2 or len({(s.dtype, s.backend) for s in settings}) != 1:
        return None
    return BatchEffect(
        dtype=settings[0].dtype,
        backend=settings[0].backend,
        batch_sizes=(settings[0].batch_size, settings[1].batch_size),
        n=pair.n_common,
        responses_changed=pair.n_common - pair.identical_response,
        verdicts_changed=pair.paired.b + pair.paired.c,
    )


def contrasts_dtypes(analysis: Analysis) -> bool:
    """Whether the plan contrasts batch sizes in more than one dtype: then RESULTS.md states the
    finding beside the verdict (a plan with fp32 contrasts only keeps its report as it was)."""
    return len({effect.dtype for effect in batch_effects(analysis)}) > 1


def _clause(effect: BatchEffect) -> str:
    low, high = sorted(effect.batch_sizes)
    word = SPECS[effect.backend].batch_word if effect.backend in SPECS else "batch"
    verdicts = "pass/fail verdict" if effect.verdicts_changed == 1 else "pass/fail verdicts"
    return (
        f"{effect.responses_changed} of {effect.n} responses and {effect.verdicts_changed} {verdicts} "
        f"under {effect.backend} ({word} {low} vs {high})"
    )


def batch_finding_block(data: ReportInput) -> list[str]:
    """One sentence per run: per dtype, what batch size changed; a dtype where nothing changed says
    "none" with its totals. Plans without batch_size controls get a line saying so."""
    effects = batch_effects(data.analysis)
    if not effects:
        return ["The plan has no batch-size contrast."]
    parts: list[str] = []
    for dtype in dict.fromkeys(e.dtype for e in effects):
        group = [e for e in effects if e.dtype == dtype]
        name = DTYPE_WORDS.get(dtype, dtype)
        if any(e.responses_changed or e.verdicts_changed for e in group):
            parts.append(f"in {name}, batch size changed " + "; ".join(_clause(e) for e in group))
        else:
            total = sum(e.n for e in group)
            parts.append(f"in {name}, none: 0 of {total} responses and 0 pass/fail verdicts changed")
    text = "; ".join(parts)
    return [text[0].upper() + text[1:] + "."]
