"""capsule.analysis.stats against textbook values, scipy, independent formulas and brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from capsule.analysis import stats
from capsule.analysis.outcomes import Outcomes, Part, parts, value


def _binomial_p(b: int, c: int) -> float:
    """Exact two-sided McNemar written out with math.comb (independent of scipy)."""
    n = b + c
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def _cluster_bootstrap(
    metric_parts: list[Part], rng: np.random.Generator, resamples: int
) -> tuple[float, float]:
    """A 95% interval resampling whole prompts, as the analysis draws it (`resample_counts`, then
    `bootstrap_interval`)."""
    n = len(metric_parts[0][0])
    return stats.bootstrap_interval(metric_parts, stats.resample_counts(n, resamples, rng), 0.95)


def test_mcnemar_textbook_values() -> None:
    assert round(stats.mcnemar_exact(4, 7), 4) == 0.5488
    assert round(stats.mcnemar_exact(8, 4), 4) == 0.3877
    assert stats.mcnemar_exact(0, 0) == 1.0
    assert stats.mcnemar_exact(5, 5) == 1.0


@pytest.mark.parametrize("b,c", [(0, 1), (0, 6), (1, 9), (3, 3), (10, 2), (17, 30), (0, 40)])
def test_mcnemar_matches_the_binomial_sum(b: int, c: int) -> None:
    assert stats.mcnemar_exact(b, c) == pytest.approx(_binomial_p(b, c), rel=1e-9)
    assert stats.mcnemar_exact(b, c) == stats.mcnemar_exact(c, b)


def test_clopper_pearson_textbook_values() -> None:
    low, high = stats.clopper_pearson(28, 32, 0.95)
    assert (round(100 * low, 1), round(100 * high, 1)) == (71.0, 96.5)
    assert stats.clopper_pearson(0, 10, 0.95)[0] == 0.0 and stats.clopper_pearson(10, 10, 0.95)[1] == 1.0
    assert stats.clopper_pearson(0, 0, 0.95) == (0.0, 1.0)


def test_wilson_textbook_value() -> None:
    # Newcombe (1998), Stat Med 17:857, example 81/263: Wilson 95% interval 0.2553 to 0.3662.
    low, high = stats.wilson(81, 263, 0.95)
    assert (round(low, 4), round(high, 4)) == (0.2553, 0.3662)
    assert stats.wilson(0, 0, 0.95) == (0.0, 1.0)


@pytest.mark.parametrize("k,n", [(0, 5), (1, 5), (3, 48), (16, 48), (161, 541), (541, 541)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_binomial_intervals_match_scipy(k: int, n: int, confidence: float) -> None:
    ci = binomtest(k, n).proportion_ci(confidence, method="wilson")
    assert stats.wilson(k, n, confidence) == pytest.approx((ci.low, ci.high), abs=1e-9)
    ci = binomtest(k, n).proportion_ci(confidence, method="exact")
    assert stats.clopper_pearson(k, n, confidence) == pytest.approx((ci.low, ci.high), abs=1e-7)


def test_proportion_interval_rejects_unknown_kind() -> None:
    with pytest.raises(Exception, match="bootstrap"):
        stats.proportion_interval("bootstrap", 1, 2, 0.95)


def _outcomes(prompt_pass: list[int], inst_pass: list[int], n_inst: list[int]) -> Outcomes:
    arrays = {r: np.array(prompt_pass, dtype=float) for r in ("strict", "loose")}
    insts = {r: np.array(inst_pass, dtype=float) for r in ("strict", "loose")}
    return Outcomes(
        keys=tuple(range(len(prompt_pass))),
        prompt_pass=arrays,
        inst_pass=insts,
        n_inst=np.array(n_inst, dtype=float),
        instruction_ids=tuple(() for _ in prompt_pass),
    )


def test_resample_counts_are_seeded_and_sum_to_n() -> None:
    a = stats.resample_counts(30, 200, np.random.default_rng(3))
    b = stats.resample_counts(30, 200, np.random.default_rng(3))
    c = stats.resample_counts(30, 200, np.random.default_rng(4))
    assert a.shape == (200, 30) and (a.sum(axis=1) == 30).all()
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_bootstrap_of_a_proportion_is_close_to_wilson() -> None:
    rng = np.random.default_rng(0)
    passed = (rng.random(400) < 0.3).astype(int).tolist()
    out = _outcomes(passed, passed, [1] * 400)
    low, high = _cluster_bootstrap(parts(out, "prompt_level_strict_acc"), np.random.default_rng(1), 4000)
    w_low, w_high = stats.wilson(sum(passed), 400, 0.95)
    assert abs(low - w_low) < 0.01 and abs(high - w_high) < 0.01
    assert low < value(parts(out, "prompt_level_strict_acc")) < high


def test_cluster_bootstrap_is_wider_than_a_naive_pooled_interval_for_correlated_instructions() -> None:
    rng = np.random.default_rng(5)
    passed = (rng.random(100) < 0.5).astype(int)
    n_inst = np.full(100, 4)
    out = _outcomes(passed.tolist(), (passed * 4).tolist(), n_inst.tolist())  # all-or-nothing prompts
    low, high = _cluster_bootstrap(parts(out, "inst_level_strict_acc"), np.random.default_rng(2), 3000)
    naive_low, naive_high = stats.wilson(int(4 * passed.sum()), 400, 0.95)
    assert (high - low) > 1.5 * (naive_high - naive_low)


def test_composite_value_is_the_mean_of_its_members() -> None:
    out = _outcomes([1, 0, 1, 0], [2, 1, 3, 0], [2, 2, 3, 1])
    composite = value(parts(out, "card_avg_strict"))
    assert composite == pytest.approx((2 / 4 + 6 / 8) / 2)


def test_paired_difference_of_identical_arms_is_zero_and_shift_is_detected() -> None:
    rng = np.random.default_rng(9)
    a_pass = (rng.random(200) < 0.4).astype(int)
    a = _outcomes(a_pass.tolist(), a_pass.tolist(), [1] * 200)
    same = stats.paired_difference_bootstrap(
        parts(a, "prompt_level_strict_acc"),
        parts(a, "prompt_level_strict_acc"),
        np.random.default_rng(1),
        1000,
        0.95,
    )
    assert same == (0.0, 0.0)
    b_pass = a_pass.copy()
    b_pass[np.flatnonzero(a_pass == 0)[:40]] = 1  # b passes 40 more prompts
    b = _outcomes(b_pass.tolist(), b_pass.tolist(), [1] * 200)
    low, high = stats.paired_difference_bootstrap(
        parts(a, "prompt_level_strict_acc"),
        parts(b, "prompt_level_strict_acc"),
        np.random.default_rng(1),
        2000,
        0.95,
    )
    assert low <= -40 / 200 <= high and high < 0


def test_min_n_rule() -> None:
    assert stats.is_powered(30, 30) and not stats.is_powered(29, 30)


def test_claim_verdict() -> None:
    assert stats.claim_verdict(0.3, (0.25, 0.35), 100, 50) == stats.REPRODUCED
    assert stats.claim_verdict(0.4, (0.25, 0.35), 100, 50) == stats.NOT_REPRODUCED
    assert stats.claim_verdict(0.3, (0.25, 0.35), 49, 50) == stats.UNDERPOWERED


def _inside(kind: str, k: int, n: int, claim: float) -> bool:
    low, high = stats.proportion_interval(kind, k, n, 0.95)
    return low <= claim <= high


@pytest.mark.parametrize("kind", ["wilson", "clopper_pearson"])
@pytest.mark.parametrize(
    "k,n,claim",
    [
        (28, 32, 0.70),
        (28, 32, 0.90),
        (10, 48, 0.299),
        (16, 48, 0.299),
        (161, 541, 0.299),
        (0, 5, 0.9),
        (5, 5, 0.0),
    ],
)
def test_flips_binomial_is_exact(kind: str, k: int, n: int, claim: float) -> None:
    flips = stats.flips_binomial(k, n, claim, kind, 0.95)
    base = _inside(kind, k, n, claim)
    reachable = {d: [c for c in (k - d, k + d) if 0 <= c <= n] for d in range(n + 1)}
    brute = next(
        (d for d in range(1, n + 1) if any(_inside(kind, c, n, claim) != base for c in reachable[d])), None
    )
    assert flips == brute


def test_flips_bootstrap_reverses_at_the_count_and_not_before() -> None:
    rng = np.random.default_rng(11)
    n = 120
    n_inst = rng.integers(1, 4, n)
    inst = np.minimum(n_inst, rng.binomial(n_inst, 0.45))
    prompt = (inst == n_inst).astype(int)
    out = _outcomes(prompt.tolist(), inst.tolist(), n_inst.tolist())
    metric_parts = parts(out, "card_avg_strict")
    counts = stats.resample_counts(n, 1000, np.random.default_rng(7))
    low, high = stats.bootstrap_interval(metric_parts, counts, 0.95)
    for claim in (low + 0.2 * (high - low), high + 0.03):
        flips = stats.flips_bootstrap(metric_parts, claim, counts, 0.95)
        assert flips is not None and flips >= 1
        base = low <= claim <= high
        # Replay the documented search: in one of the two directions `flips` changes reverse it, fewer never.
        reversed_at = []
        for direction in ("up", "down"):
            deltas = [(den - num) if direction == "up" else -num for num, den in metric_parts]
            gain = sum(np.abs(d) / den.sum() for d, (_, den) in zip(deltas, metric_parts, strict=True))
            order = sorted((i for i in range(n) if gain[i] > 0), key=lambda i: (-gain[i], i))
            for step in range(1, len(order) + 1):
                changed = []
                for (num, den), delta in zip(metric_parts, deltas, strict=True):
                    new = num.copy()
                    new[order[:step]] += delta[order[:step]]
                    changed.append((new, den))
                lo, hi = stats.bootstrap_interval(changed, counts, 0.95)
                if (lo <= claim <= hi) != base:
                    reversed_at.append(step)
                    break
        assert flips == min(reversed_at)


def test_rounding_conventions() -> None:
    assert stats.percent(0.123456) == 12.35
    assert str(stats.percent(-0.0000001)) == "0.0"
    assert stats.sig4(0.000123456) == 0.0001235 and stats.sig4(0.548828125) == 0.5488
