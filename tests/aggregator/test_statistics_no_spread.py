"""Score intervals without spread across tasks: never zero width, exact at the counts.

The fallback for n tasks of one value c on a scale [L, U] is [c − π(c − L), c + π(U − c)]
with π the exact upper bound on the share of tasks departing from c. References: the
closed form of Clopper–Pearson at 0 of n, 1 − (α/2)^(1/n), and scipy's exact binomial
interval; coverage by hand on the distributions that make agreement likeliest.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy.stats import binomtest  # type: ignore[import-untyped]

from assay_report import statistics as st
from assay_report.statistics._no_spread import no_spread_bounds
from assay_testing.synthetic_tables import synthetic_tables

from .stats import rows_of

SETTINGS = {"seed": 3, "n_resamples": 400}


def _hand(c: float, n: int, low: float, high: float, confidence: float) -> tuple[float, float]:
    pi = 1.0 - ((1.0 - confidence) / 2.0) ** (1.0 / n)
    return c - pi * (c - low), c + pi * (high - c)


@pytest.mark.parametrize("confidence", [0.9, 0.95])
@pytest.mark.parametrize("n", [1, 2, 8, 30])
@pytest.mark.parametrize(
    ("c", "scale"), [(0.0, (0, 10)), (2.875, (0, 10)), (10.0, (0, 10)), (4.0, (-10, 10))]
)
def test_bounds_equal_the_closed_form_and_scipys_exact_interval(
    confidence: float, n: int, c: float, scale: tuple[int, int]
) -> None:
    lo, hi = no_spread_bounds(np.array([c]), np.array([float(n)]), *scale, confidence)
    assert (lo[0], hi[0]) == pytest.approx(_hand(c, n, *scale, confidence), abs=1e-12)
    pi = binomtest(0, n).proportion_ci(confidence_level=confidence, method="exact").high
    assert hi[0] == pytest.approx(c + pi * (scale[1] - c), abs=1e-12)
    assert hi[0] > lo[0]


def test_no_tasks_gives_no_interval() -> None:
    lo, hi = no_spread_bounds(np.array([math.nan]), np.array([0.0]), 0.0, 10.0, 0.95)
    assert math.isnan(lo[0]) and math.isnan(hi[0])


@pytest.mark.parametrize("n", [1, 3, 8, 20])
def test_agreeing_tasks_miss_the_mean_at_most_alpha_over_two_per_side(n: int) -> None:
    # Tasks at c with probability q, else at the scale's top: the likeliest way n tasks
    # agree while the mean lies above the interval. The interval is computed at c, so it
    # misses μ exactly when μ > its top; that happens on all-agree samples, probability q^n.
    c, alpha = 2.875, 0.05
    top = _hand(c, n, 0.0, 10.0, 1 - alpha)[1]
    q = np.linspace(0.001, 0.999, 999)
    mu = q * c + (1 - q) * 10.0
    missed = np.where(mu > top, q**n, 0.0)
    assert missed.max() <= alpha / 2
    assert missed.max() > alpha / 2 * 0.8, "the bound is exact, not needlessly wide"


def _flat_agent(t: st.Tables, agent: str, score: int) -> st.Tables:
    ratings = t.ratings.with_columns(
        score=pl.when(pl.col("agent_id") == agent).then(score).otherwise(pl.col("score"))
    )
    return st.make_tables(ratings, t.runs, t.tags)


def test_an_agent_scoring_the_same_on_every_task_gets_the_bounded_interval() -> None:
    t = synthetic_tables(n_tasks=12, n_agents=3, seed=2, empty_artifact_rate=0.0)
    flat = _flat_agent(t, "agent_0", 3)
    rows = {r.agent_id: r for r in rows_of(st.overall_score_rows, flat, **SETTINGS)}
    before = {r.agent_id: r for r in rows_of(st.overall_score_rows, t, **SETTINGS)}
    r = rows["agent_0"]
    assert r.estimate == 3.0 and r.no_spread and r.n_tasks == 12
    assert (r.ci_low, r.ci_high) == pytest.approx(_hand(3.0, 12, 0.0, 10.0, 0.95), abs=1e-12)
    for other in ("agent_1", "agent_2"):  # intervals with spread: the bootstrap's, untouched
        assert not rows[other].no_spread
        assert (rows[other].ci_low, rows[other].ci_high) == (
            before[other].ci_low,
            before[other].ci_high,
        )
        assert rows[other].ci_high > rows[other].ci_low
    dims = [
        d for d in rows_of(st.dimension_score_rows, flat, **SETTINGS) if d.agent_id == "agent_0"
    ]
    assert dims and all(d.no_spread and d.ci_high > d.ci_low for d in dims)
    [gap] = [
        g for g in rows_of(st.communication_gap_rows, flat, **SETTINGS) if g.agent_id == "agent_0"
    ]
    assert gap.gap == 0.0 and gap.no_spread
    assert (gap.ci_low, gap.ci_high) == pytest.approx(_hand(0.0, 12, -10.0, 10.0, 0.95), abs=1e-12)


def test_no_spread_is_warned_and_named() -> None:
    t = _flat_agent(synthetic_tables(n_tasks=12, n_agents=3, seed=2), "agent_0", 3)
    rep = st.compute_statistics(t, st.AnalysisSettings(seed=3, n_resamples=400))
    w = {(x.kind, x.subject): x for x in rep.warnings}
    scores = w[("zero_width_interval", "agent_scores")]
    assert scores.message.startswith(
        "1 of 3 task-bootstrap intervals in agent_scores have zero width"
    )
    assert "bounded scale" in scores.message and scores.affects == ("agent_scores",)
    assert ("zero_width_interval", "communication_gap") in w


def test_a_coefficient_without_spread_is_not_estimable() -> None:
    # No noise at all: every rating is the same additive sum, so each judge's own-family
    # coefficient is the same in every task resample.
    t = synthetic_tables(
        n_tasks=12,
        n_agents=3,
        seed=2,
        task_sd=0.0,
        run_sd=0.0,
        rating_sd=0.0,
        empty_artifact_rate=0.0,
        self_preference={"judge_a": 1.0},
    )
    rows = {r.judge_id: r for r in rows_of(st.self_preference_rows, t, **SETTINGS)}
    a = rows["judge_a"]
    assert a.coefficient == pytest.approx(1.0) and a.no_spread
    assert math.isnan(a.ci_low) and math.isnan(a.ci_high)
    rep = st.compute_statistics(t, st.AnalysisSettings(seed=3, n_resamples=400))
    w = {(x.kind, x.subject): x for x in rep.warnings}
    assert "not estimable" in w[("zero_width_interval", "self_preference")].message
