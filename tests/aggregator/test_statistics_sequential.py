"""The hedged betting confidence sequence: hand values, an independent loop, coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

from assay_report.statistics import (
    StatisticsInputError,
    hedged_capital,
    hedged_sequence,
    mean_interval,
)

ALPHA = 0.05


def _capital_by_hand(x: list[float], m: float, alpha: float) -> list[float]:
    """``log K_t(m)`` written from WSR (2024) Theorem 3 one observation at a time."""
    log_up, log_down, out = 0.0, 0.0, []
    total, squares = 0.0, 0.0
    var_before = 0.25
    for t, xi in enumerate(x, start=1):
        bet = math.sqrt(2 * math.log(2 / alpha) / (var_before * t * math.log(1 + t)))
        up = bet if m == 0 else min(bet, 0.5 / m)
        down = bet if m == 1 else min(bet, 0.5 / (1 - m))
        log_up += math.log(1 + up * (xi - m))
        log_down += math.log(1 - down * (xi - m))
        out.append(max(math.log(0.5) + log_up, math.log(0.5) + log_down))
        total += xi
        mean = min((0.5 + total) / (t + 1), 1.0)
        squares += (xi - mean) ** 2
        var_before = (0.25 + squares) / (t + 1)
    return out


def _sequence_by_loop(x: list[float], alpha: float, breaks: int) -> tuple[list[float], list[float]]:
    """The grid method of ``confseq.betting.cs_from_martingale``, as plain loops."""
    grid = [i / breaks for i in range(breaks + 1)]
    caps = [_capital_by_hand(x, m, alpha) for m in grid]
    lows, highs = [], []
    for t in range(len(x)):
        kept = [m for m, cap in zip(grid, caps, strict=True) if cap[t] < math.log(1 / alpha)]
        lo = max(0.0, kept[0] - 1 / breaks) if kept else 0.0
        hi = min(1.0, kept[-1] + 1 / breaks) if kept else 1.0
        lows.append(max(lo, lows[-1]) if lows else lo)
        highs.append(min(hi, highs[-1]) if highs else hi)
    return lows, highs


def test_capital_matches_a_hand_computation() -> None:
    # x = (1, 1), m = 1/2: both bets are cut to c/m = 1, so K⁺ = 1.5, 2.25 and the hedge
    # takes half of it; K⁻ = 0.5, 0.25.
    log_k = hedged_capital(np.array([1.0, 1.0]), np.array([0.5]), ALPHA)[0]
    assert log_k == pytest.approx([math.log(0.75), math.log(1.125)])


def test_all_ones_exclude_one_half_first_after_ten() -> None:
    # ½·1.5⁹ = 19.2 < 1/α = 20 ≤ ½·1.5¹⁰ = 28.8: m = ½ is rejected first at t = 10.
    cs = hedged_sequence(np.ones(12), ALPHA)
    assert cs.low[8] < 0.5 <= cs.low[9]
    assert cs.high[-1] == 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bounds_match_an_independent_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.beta(2, 3, size=40)
    lows, highs = _sequence_by_loop(x.tolist(), ALPHA, breaks=200)
    cs = hedged_sequence(x, ALPHA, breaks=200)
    np.testing.assert_allclose(cs.low, lows, atol=1e-12)
    np.testing.assert_allclose(cs.high, highs, atol=1e-12)


def test_time_uniform_coverage_at_least_nominal() -> None:
    # 300 sequences of 150 tasks from three bounded laws; a miss anywhere in a
    # sequence is a miss. Seeded; the construction is conservative (≈1% observed).
    laws = (
        (lambda r, n: r.beta(2, 5, n), 2 / 7),
        (lambda r, n: (r.random(n) < 0.3).astype(float), 0.3),
        (lambda r, n: np.where(r.random(n) < 0.9, 0.95, 0.0), 0.855),
    )
    misses = 0
    runs = 0
    for draw, mu in laws:
        for seed in range(100):
            x = draw(np.random.default_rng(seed), 150)
            cs = hedged_sequence(x, ALPHA)
            misses += bool(np.any((cs.low > mu) | (cs.high < mu)))
            runs += 1
    assert 1 - misses / runs >= 1 - ALPHA


def test_shrinks_with_tasks_and_never_to_zero_width() -> None:
    cs = hedged_sequence(np.full(2000, 0.5), ALPHA)
    widths = cs.high - cs.low
    assert widths[-1] < widths[99] < widths[9]
    assert widths.min() > 0


def test_few_tasks_are_not_estimable_and_claim_the_whole_range() -> None:
    one = mean_interval(np.array([7.0]), 0.0, 10.0, 0.95)
    assert (one.estimable, one.low, one.high, one.n) == (False, 0.0, 10.0, 1)
    none = mean_interval(np.zeros(0), 0.0, 10.0, 0.95)
    assert not none.estimable and math.isnan(none.estimate)


def test_rescales_to_the_scores_range() -> None:
    x = np.random.default_rng(4).beta(5, 2, size=200)
    unit = hedged_sequence(x, ALPHA)
    scored = mean_interval(10 * x, 0.0, 10.0, 1 - ALPHA)
    assert (scored.low, scored.high) == pytest.approx((10 * unit.low[-1], 10 * unit.high[-1]))
    assert scored.low < scored.estimate < scored.high


@pytest.mark.parametrize("bad", [[0.2, 1.5], [-0.1, 0.5], [0.3, math.nan]])
def test_rejects_observations_outside_the_unit_interval(bad: list[float]) -> None:
    with pytest.raises(StatisticsInputError):
        hedged_sequence(np.array(bad), ALPHA)
