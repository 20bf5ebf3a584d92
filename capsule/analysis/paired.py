"""One paired comparison of two arms on their common prompts: McNemar counts, p, difference interval.

Shared by the plan's comparisons and by the batch-size, backend and seed-vs-batch controls so that
every paired number in analysis.json is computed one way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from capsule.analysis.outcomes import Outcomes, parts, reading_of, value
from capsule.analysis.paired_schema import Difference, DifferenceInterval, Paired
from capsule.analysis.stats import (
    UNDERPOWERED,
    is_powered,
    mcnemar_exact,
    paired_difference_interval,
    percent,
    seeded_resample_counts,
    sig4,
)

DIFFER = "differ"
INDISTINGUISHABLE = "indistinguishable"


def common_keys(a: Outcomes | None, b: Outcomes | None) -> list[int]:
    """Keys scored in both arms (empty when either arm is missing): partial arms pair on these."""
    if a is None or b is None:
        return []
    return sorted(set(a.keys) & set(b.keys))


def discordant(a: Outcomes, b: Outcomes, reading: str) -> tuple[int, int]:
    """(b, c) for two aligned outcomes: prompts passing in a but not b, and in b but not a."""
    pass_a, pass_b = a.prompt_pass[reading] > 0, b.prompt_pass[reading] > 0
    return int(np.sum(pass_a & ~pass_b)), int(np.sum(~pass_a & pass_b))


def rule_text(confidence: float, min_pairs: int, reading: str) -> str:
    """The decision rule in words, stored beside each verdict so a reader need not open the plan."""
    alpha = sig4(1.0 - confidence)
    return (
        f"UNDERPOWERED if n_pairs < {min_pairs}; else '{DIFFER}' if the exact McNemar p on prompt-level "
        f"{reading} pass < {alpha}, else '{INDISTINGUISHABLE}'; difference interval: paired cluster bootstrap"
    )


def paired_comparison(
    names: tuple[str, str],
    a: Outcomes | None,
    b: Outcomes | None,
    metric: str,
    confidence: float,
    *,
    min_pairs: int,
    resamples: int,
    seed: int,
) -> Paired:
    """Compare arms `names` = (a, b) on `metric` over their common prompts.

    b / c are discordant prompts on the prompt-level pass of the metric's reading (strict or
    loose); the p-value is exact McNemar on them; the difference a - b of `metric` gets a paired
    cluster-bootstrap interval drawn from `numpy.random.default_rng(seed)`. The verdict follows the
    rule in `rule_text`.
    """
    reading = reading_of(metric)
    keys = common_keys(a, b)
    header: dict[str, Any] = {
        "arms": list(names),
        "metric": metric,
        "confidence": confidence,
        "n_pairs": len(keys),
        "only_in": {
            names[0]: 0 if a is None else len(set(a.keys) - set(keys)),
            names[1]: 0 if b is None else len(set(b.keys) - set(keys)),
        },
        "missing_arms": [name for name, arm in zip(names, (a, b), strict=True) if arm is None],
        "rule": rule_text(confidence, min_pairs, reading),
    }
    if not keys:
        return Paired(**header, b=0, c=0, p_value=1.0, values_pct=None, difference=None, verdict=UNDERPOWERED)
    assert a is not None and b is not None
    pa, pb = a.subset(keys), b.subset(keys)
    n_b, n_c = discordant(pa, pb, reading)
    p = mcnemar_exact(n_b, n_c)
    parts_a, parts_b = parts(pa, metric), parts(pb, metric)
    counts = seeded_resample_counts(len(keys), resamples, seed)
    low, high = paired_difference_interval(parts_a, parts_b, counts, confidence)
    value_a, value_b = value(parts_a), value(parts_b)
    if not is_powered(len(keys), min_pairs):
        verdict = UNDERPOWERED
    else:
        verdict = DIFFER if p < 1.0 - confidence else INDISTINGUISHABLE
    interval = DifferenceInterval(
        low_pct=percent(low),
        high_pct=percent(high),
        kind="bootstrap",
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )
    return Paired(
        **header,
        b=n_b,
        c=n_c,
        p_value=sig4(p),
        values_pct={names[0]: percent(value_a), names[1]: percent(value_b)},
        difference=Difference(percent(value_a - value_b), interval, bool(low > 0 or high < 0)),
        verdict=verdict,
    )
