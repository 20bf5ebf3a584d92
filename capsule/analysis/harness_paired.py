"""The paired comparison of two imported runs on their common prompts, as the plans compare two arms.

Exact McNemar on prompt-level passes and a paired cluster-bootstrap interval of the difference
(`capsule.analysis.paired`), once on our scorer's verdicts and once on the verdicts each harness
stored, so a reader sees whether the conclusion depends on which scorer decided.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from capsule.analysis.codec import encode
from capsule.analysis.outcomes import check_metric, outcomes_from_scores
from capsule.analysis.paired import paired_comparison
from capsule.errors import BadInputError
from capsule.generation.harness.samples import HarnessImport


@dataclass(frozen=True)
class PairedSettings:
    """The comparison's rule; the defaults are those of the sealed plans' comparisons."""

    metric: str = "prompt_level_strict_acc"  # McNemar counts prompt-level passes of its reading
    confidence: float = 0.95  # 'differ' when McNemar p < 1 - confidence
    min_pairs: int = 50  # fewer common prompts: UNDERPOWERED
    resamples: int = 10_000  # paired bootstrap resamples of the difference
    seed: int = 0  # the bootstrap's numpy seed


Rows = Sequence[dict[str, Any]]


def require_common_prompts(first: HarnessImport, second: HarnessImport) -> None:
    """Refuse two files that share no prompt: there is nothing to pair (BadInputError, one line)."""
    if not {s.key for s in first.samples} & {s.key for s in second.samples}:
        raise BadInputError(
            f"{first.path} ({len(first.samples)} prompts) and {second.path} ({len(second.samples)} prompts) "
            "share no prompt, so there is nothing to pair; nothing was written: give two runs "
            "of common prompts"
        )


def paired_imports(
    names: tuple[str, str], ours: tuple[Rows, Rows], stored: tuple[Rows, Rows], settings: PairedSettings
) -> dict[str, Any]:
    """`names` = (a, b): the comparison on our score rows and on the harnesses' stored verdicts."""
    check_metric(settings.metric)

    def compare(rows: tuple[Rows, Rows], label: str) -> Any:
        a, b = (outcomes_from_scores(r, f"{label} {n}") for r, n in zip(rows, names, strict=True))
        return encode(
            paired_comparison(
                names, a, b, settings.metric, settings.confidence,
                min_pairs=settings.min_pairs, resamples=settings.resamples, seed=settings.seed,
            )
        )

    return {
        "settings": asdict(settings),
        "ours": compare(ours, "ours"),
        "harness": compare(stored, "harness"),
    }
