"""The capsule's statistics: exact McNemar, binomial intervals, a seeded cluster bootstrap, verdicts.

Everything works on fractions in [0, 1]; `percent` and `sig4` are the rounding conventions of
`analysis.json`. Randomness only ever comes from a passed-in `numpy.random.Generator`, so the same
seed gives the same interval on any machine with the same NumPy bit-generator stream.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy import stats as sps

from capsule.analysis.outcomes import Part
from capsule.errors import BadInputError

REPRODUCED = "REPRODUCED"
NOT_REPRODUCED = "NOT REPRODUCED"
UNDERPOWERED = "UNDERPOWERED"
NOT_RUN = "NOT RUN"  # a verdict or comparison whose arm the backend refused (a result, not a gap)
INTERVALS: tuple[str, ...] = ("wilson", "clopper_pearson", "bootstrap")


def percent(fraction: float) -> float:
    """A fraction as percent rounded to 2 decimals (never -0.0), the unit analysis.json stores."""
    return round(100.0 * fraction, 2) + 0.0


def sig4(x: float) -> float:
    """`x` rounded to 4 significant digits (p-values in analysis.json)."""
    return float(f"{x:.4g}") + 0.0


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: the binomial test of b successes in b + c at 1/2.

    b and c are the discordant pairs (pass/fail and fail/pass); concordant pairs carry no
    information about a difference. With no discordant pairs there is no evidence: p = 1.
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be non-negative")
    if b + c == 0:
        return 1.0
    return float(min(1.0, sps.binomtest(b, b + c, 0.5, alternative="two-sided").pvalue))


def clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval for k successes in n, from beta quantiles; (0, 1) when n = 0.

    Conservative: coverage is at least `confidence` for every true proportion.
    """
    if n == 0:
        return 0.0, 1.0
    alpha = 1.0 - confidence
    low = 0.0 if k == 0 else float(sps.beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(sps.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return low, high


def wilson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """Wilson score interval for k successes in n; (0, 1) when n = 0.

    Better centred than Wald near 0 and 1 and at small n, which is where subsampled arms live.
    """
    if n == 0:
        return 0.0, 1.0
    z = float(sps.norm.ppf(1 - (1 - confidence) / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def proportion_interval(kind: str, k: int, n: int, confidence: float) -> tuple[float, float]:
    """The `kind` ("wilson" or "clopper_pearson") interval for k of n."""
    if kind == "wilson":
        return wilson(k, n, confidence)
    if kind == "clopper_pearson":
        return clopper_pearson(k, n, confidence)
    raise BadInputError(f"interval {kind!r} is not a binomial interval; use wilson or clopper_pearson")


def resample_counts(n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each of n prompts is drawn in each bootstrap sample: float64, shape (resamples, n).

    Sample r is `rng.integers(0, n, n)` (indices, not weights, so the stream is simple to restate);
    returned as counts so every metric on every sample is one matrix-vector product.
    """
    if n == 0 or resamples <= 0:
        return np.zeros((max(resamples, 0), n))
    draws = rng.integers(0, n, size=(resamples, n))
    draws += np.arange(resamples)[:, None] * n
    return np.bincount(draws.ravel(), minlength=resamples * n).reshape(resamples, n).astype(np.float64)


@lru_cache(maxsize=2)
def seeded_resample_counts(n: int, resamples: int, seed: int) -> np.ndarray:
    """`resample_counts(n, resamples, numpy.random.default_rng(seed))`, read-only and memoized.

    Every bootstrap in one analysis with the same n and seed shares these draws (common random
    numbers); memoizing them saves redrawing tens of megabytes per arm, comparison and reading.
    """
    counts = resample_counts(n, resamples, np.random.default_rng(seed))
    counts.setflags(write=False)
    return counts


def _sums(metric_parts: Sequence[Part], counts: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    if not metric_parts:
        return []
    totals = counts @ np.column_stack([vector for part in metric_parts for vector in part])  # one pass
    return [(totals[:, 2 * i].copy(), totals[:, 2 * i + 1].copy()) for i in range(len(metric_parts))]


def _statistic(sums: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    ratios = [np.divide(s_num, s_den, out=np.zeros_like(s_num), where=s_den > 0) for s_num, s_den in sums]
    mean: np.ndarray = np.mean(ratios, axis=0)
    return mean


def percentile_interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile interval of bootstrap samples (NumPy's default linear quantile)."""
    if samples.size == 0:
        return 0.0, 1.0
    alpha = 1.0 - confidence
    low, high = np.quantile(samples, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def bootstrap_interval(
    metric_parts: Sequence[Part], counts: np.ndarray, confidence: float
) -> tuple[float, float]:
    """Percentile interval of a metric over given resample counts (from `resample_counts`)."""
    return percentile_interval(_statistic(_sums(metric_parts, counts)), confidence)


def paired_difference_bootstrap(
    parts_a: Sequence[Part],
    parts_b: Sequence[Part],
    rng: np.random.Generator,
    resamples: int,
    confidence: float,
) -> tuple[float, float]:
    """Percentile interval of metric(a) - metric(b) on paired prompts, resampling prompts jointly.

    `parts_a` and `parts_b` must be aligned on the same prompt keys; resampling the pair keeps the
    within-prompt correlation that makes a paired comparison sharper than two separate intervals.
    """
    n = len(parts_a[0][0]) if parts_a else 0
    return paired_difference_interval(parts_a, parts_b, resample_counts(n, resamples, rng), confidence)


def paired_difference_interval(
    parts_a: Sequence[Part], parts_b: Sequence[Part], counts: np.ndarray, confidence: float
) -> tuple[float, float]:
    """`paired_difference_bootstrap` over given resample counts (shared draws, see above)."""
    diff = _statistic(_sums(parts_a, counts)) - _statistic(_sums(parts_b, counts))
    return percentile_interval(diff, confidence)


def is_powered(n: int, min_n: int) -> bool:
    """The plan's minimum-n rule: a verdict is read only from at least `min_n` prompts (or pairs)."""
    return n >= min_n


def claim_verdict(claim: float, interval: tuple[float, float], n: int, min_n: int) -> str:
    """REPRODUCED when the claim (a fraction) lies in the interval, NOT REPRODUCED when outside,
    UNDERPOWERED when fewer than `min_n` prompts stand behind the interval."""
    if not is_powered(n, min_n):
        return UNDERPOWERED
    return REPRODUCED if interval[0] <= claim <= interval[1] else NOT_REPRODUCED


def _inside(claim: float, interval: tuple[float, float]) -> bool:
    return interval[0] <= claim <= interval[1]


def flips_binomial(k: int, n: int, claim: float, kind: str, confidence: float) -> int | None:
    """Fewest prompts that must flip pass<->fail for the claim to cross into / out of the interval.

    Exact: flipping f prompts can reach any pass count within f of k, so this searches outward
    from k over every reachable count 0..n, recomputing the `kind` interval for each; None when no
    count reverses the verdict.
    """
    base = _inside(claim, proportion_interval(kind, k, n, confidence))
    for distance in range(1, n + 1):
        for candidate in (k - distance, k + distance):
            if (
                0 <= candidate <= n
                and _inside(claim, proportion_interval(kind, candidate, n, confidence)) != base
            ):
                return distance
    return None


def flips_bootstrap(
    metric_parts: Sequence[Part], claim: float, counts: np.ndarray, confidence: float
) -> int | None:
    """Fewest prompts whose outcome must change for the claim to cross the bootstrap interval.

    A changed prompt either passes every instruction it carries or fails every one: these are the
    largest moves a prompt can make, in every member of a composite at once. In each direction,
    prompts are changed in order of how far they move the point estimate (ties by key order), and
    after each change the percentile interval is recomputed on the *same* resamples (`counts`, the
    matrix the reported interval came from). This order is optimal for the point estimate (no f
    changes move it further), so the count is exact for any interval that shifts with the estimate;
    for the percentile interval it is the count along that order, which a different choice of
    prompts with heavier resample weights could in rare cases beat by one or two. None when no
    change reverses the verdict.
    """
    sums = _sums(metric_parts, counts)
    base = _inside(claim, percentile_interval(_statistic(sums), confidence))
    found: list[int] = []
    for direction in ("up", "down"):
        deltas = [(den - num) if direction == "up" else -num for num, den in metric_parts]
        gain = np.zeros(counts.shape[1])
        for delta, (_, den) in zip(deltas, metric_parts, strict=True):
            if den.sum():
                gain += np.abs(delta) / den.sum()
        order = sorted((i for i in range(len(gain)) if gain[i] > 0), key=lambda i: (-gain[i], i))
        running = [(s_num.copy(), s_den) for s_num, s_den in sums]
        for step, prompt in enumerate(order, start=1):
            for (s_num, _), delta in zip(running, deltas, strict=True):
                s_num += counts[:, prompt] * delta[prompt]
            if _inside(claim, percentile_interval(_statistic(running), confidence)) != base:
                found.append(step)
                break
    return min(found) if found else None
