"""A harness's stored IFEval verdicts against our deterministic scorer: where they differ and why.

For every instruction whose stored verdict (strict or loose) differs from ours at the seed, the
reason is looked for in the known causes, in this order:

- `think-block`: the harness scored the text with its `<think>` block, which the stored text
  reproduces (lighteval before it stripped those blocks);
- `random-letter`: `keywords:letter_frequency` with a letter outside a-z, for which upstream draws
  one of 52 letters on every evaluation; the stored verdict is what one of those letters gives;
- `langdetect`: an instruction decided by langdetect, which upstream never seeds; the stored verdict
  is what langdetect gives under one of the seeds tried;
- `scorer-version`: any other instruction is deterministic, and our verdicts equal Google's reference
  as shipped in lm-eval 0.4.13 on every instruction (the parity tests), so the harness that wrote the
  file scored with other code or data (another version, an NLTK tokenizer model, an edited file);
- `unexplained`: a letter or langdetect instruction whose stored verdict no letter or seed gives.

Beside them: both sides' metrics and the letter band (every possible letter evaluated).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from capsule.analysis.outcomes import READINGS, outcomes_from_scores
from capsule.analysis.scorer_controls import metric_values, plain
from capsule.analysis.stats import percent
from capsule.generation.harness.samples import HarnessImport, ImportedSample
from ifeval_scorer import METRICS, Prompt, PromptVerdicts, evaluate_prompt, letter_band
from ifeval_scorer.rule import LETTERS

LETTER_INSTRUCTION = "keywords:letter_frequency"
LANGDETECT_INSTRUCTIONS = frozenset(
    {"language:response_language", "change_case:english_capital", "change_case:english_lowercase"}
)
LANGDETECT_SEEDS = tuple(range(10))  # langdetect seeds tried for a langdetect instruction's verdict

REASONS: dict[str, str] = {
    "think-block": "the harness scored the text with its <think> block; on that text our scorer agrees",
    "random-letter": "keywords:letter_frequency with a letter outside a-z: upstream draws one of 52 letters "
    "each time, and the stored verdict is what one of them gives",
    "langdetect": "langdetect decides it and is unseeded upstream: the stored verdict is what langdetect "
    f"gives under one of seeds {LANGDETECT_SEEDS[0]}-{LANGDETECT_SEEDS[-1]}",
    "scorer-version": "deterministic, and our scorer equals Google's reference (lm-eval 0.4.13) on it: the "
    "harness scored with other code or data (another version, tokenizer model, or an edited file)",
    "unexplained": "a random letter or langdetect instruction whose stored verdict no letter or seed gives",
}


@dataclass(frozen=True)
class Disagreement:
    """One instruction of one prompt whose stored verdict differs from ours, and why."""

    key: int
    index: int
    instruction_id: str
    readings: list[str]
    harness: dict[str, bool]
    ours: dict[str, bool]
    reason: str
    where: str


def harness_score_rows(imported: HarnessImport, prompts: Mapping[int, Prompt]) -> list[dict[str, Any]]:
    """The harness's own verdicts as score rows (the shape `capsule score` writes)."""
    return [
        {"key": s.key, "instruction_id_list": list(prompts[s.key].instruction_id_list), **s.verdicts}
        for s in imported.samples
    ]


def _reproduced(options: Sequence[PromptVerdicts], index: int, wanted: Mapping[str, bool]) -> bool:
    """Whether, reading by reading, some option gives the stored verdict (upstream draws per pass)."""
    return all(any(getattr(o, r)[index] == wanted[r] for o in options) for r in wanted)


def reason_for(sample: ImportedSample, prompt: Prompt, ours: PromptVerdicts, index: int,
               wanted: Mapping[str, bool], seed: int) -> str:
    """The first known cause (module docstring) that gives the stored verdicts `wanted`."""
    if sample.think_removed and _reproduced([evaluate_prompt(prompt, sample.raw, seed)], index, wanted):
        return "think-block"
    instruction = prompt.instruction_id_list[index]
    if instruction == LETTER_INSTRUCTION and ours.random_letter:
        options = [evaluate_prompt(prompt, sample.response, seed, letter=letter) for letter in LETTERS]
        return "random-letter" if _reproduced(options, index, wanted) else "unexplained"
    if instruction in LANGDETECT_INSTRUCTIONS:
        options = [evaluate_prompt(prompt, sample.response, s) for s in LANGDETECT_SEEDS]
        return "langdetect" if _reproduced(options, index, wanted) else "unexplained"
    return "scorer-version"


def disagreements(
    imported: HarnessImport, ours: Mapping[int, PromptVerdicts], prompts: Mapping[int, Prompt], seed: int
) -> list[Disagreement]:
    """Every (prompt, instruction) whose stored strict or loose verdict differs from ours, with its reason."""
    found = []
    for sample in imported.samples:
        prompt, verdicts = prompts[sample.key], ours[sample.key]
        for index, instruction in enumerate(prompt.instruction_id_list):
            mine = {r: bool(getattr(verdicts, r)[index]) for r in READINGS}
            stored = {r: bool(sample.verdicts[r]["instructions"][index]) for r in READINGS}
            differing = [r for r in READINGS if mine[r] != stored[r]]
            if not differing:
                continue
            reason = reason_for(sample, prompt, verdicts, index, {r: stored[r] for r in differing}, seed)
            found.append(
                Disagreement(
                    key=sample.key, index=index, instruction_id=instruction, readings=differing,
                    harness=stored, ours=mine, reason=reason, where=sample.where,
                )
            )
    return found


@dataclass(frozen=True)
class HarnessCheck:
    """One import checked: our score rows, both sides' metrics, the band, and the disagreements."""

    score_rows: list[dict[str, Any]]
    summary: dict[str, Any]


def check_import(imported: HarnessImport, prompts: Mapping[int, Prompt], seed: int) -> HarnessCheck:
    """Score the imported responses at `seed`, with the letter band, and compare with the stored verdicts."""
    rows = [{"key": s.key, "response": s.response} for s in imported.samples]
    band = letter_band(rows, seed=seed, prompts=prompts)
    ours = band.scores
    found = disagreements(imported, ours.by_key(), prompts, seed)
    harness_values = metric_values(outcomes_from_scores(harness_score_rows(imported, prompts), "harness"))
    our_values = metric_values(outcomes_from_scores(ours.rows, "ours"))
    band_pct = {
        m: {"low": percent(band.low[m]), "seeded": our_values[m], "high": percent(band.high[m])}
        for m in METRICS
    }
    counts: dict[str, int] = {}
    for item in found:
        counts[item.reason] = counts.get(item.reason, 0) + 1
    summary = {
        "harness": imported.harness,
        "layout": imported.layout,
        "file": str(imported.path),
        "file_sha256": imported.sha256,
        "n": len(imported.samples),
        "seed": seed,
        "think_blocks_removed": sum(s.think_removed for s in imported.samples),
        "scored_text": dict(sorted(Counter(s.scored_field for s in imported.samples).items())),
        "truncated_inputs": [
            {"key": s.key, "tokens": s.truncated_tokens, "where": s.where}
            for s in imported.samples if s.truncated_tokens
        ],
        "metrics_pct": {"ours": our_values, "harness": harness_values},
        "band": {"ambiguous_keys": list(band.ambiguous_keys), "metrics_pct": band_pct},
        "harness_in_band": {
            m: band_pct[m]["low"] <= harness_values[m] <= band_pct[m]["high"] for m in METRICS
        },
        "disagreements": [vars(item) for item in found],
        "reason_counts": dict(sorted(counts.items())),
        "reasons": {name: REASONS[name] for name in sorted(counts)},
    }
    return HarnessCheck(score_rows=ours.rows, summary=plain(summary))
