"""Judge statistics: agreement against krippendorff/pingouin, self-preference against OLS."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

from assay_report import statistics as st
from assay_report.statistics._self_preference import design, fit
from assay_testing.synthetic_tables import synthetic_tables
from tests.aggregator.stats import rows_of

with warnings.catch_warnings():  # third-party imports may warn on newer pandas/numpy
    warnings.simplefilter("ignore")
    import krippendorff
    import pandas
    import pingouin


def _context(tables: st.Tables, seed: int = 0, n_resamples: int = 50) -> st.Context:
    return next(st.contexts(tables, st.AnalysisSettings(seed=seed, n_resamples=n_resamples)))


@pytest.fixture(scope="module")
def unbalanced() -> st.Tables:
    """Small campaign, 2 epochs, 2 samples, and judge_c missing on about a quarter of runs."""
    t = synthetic_tables(
        n_tasks=25,
        n_agents=5,
        n_epochs=2,
        n_samples=2,
        judge_leniency={"judge_b": 1.0},
        self_preference={"judge_a": 1.0},
        seed=5,
    )
    drop = t.runs.filter(pl.col("run_id").hash(7) % 4 == 0).select("run_id")
    ratings = t.ratings.filter(
        ~((pl.col("judge_id") == "judge_c") & pl.col("run_id").is_in(drop["run_id"].implode()))
    )
    return st.make_tables(ratings, t.runs, t.tags)


def test_alpha_matches_krippendorff_package(unbalanced: st.Tables) -> None:
    s = _context(unbalanced).panel.judge_score
    assert np.isnan(s).any()  # exercises missing values
    ref = krippendorff.alpha(reliability_data=s.T, level_of_measurement="interval")
    ours = rows_of(st.agreement_rows, unbalanced, seed=0)[0].krippendorff_alpha
    assert ours == pytest.approx(ref, abs=1e-9)
    assert st.krippendorff_alpha_interval(s) == pytest.approx(ref, abs=1e-9)
    ints = np.array([[1, 2, 3, 3, np.nan], [1, 2, 3, 4, 5], [np.nan, 3, 3, 4, 5]]).T
    ref2 = krippendorff.alpha(reliability_data=ints.T, level_of_measurement="interval")
    assert st.krippendorff_alpha_interval(ints) == pytest.approx(ref2, abs=1e-12)


def test_icc_matches_pingouin_and_textbook(unbalanced: st.Tables) -> None:
    s = _context(unbalanced).panel.judge_score
    x = s[~np.isnan(s).any(axis=1)]
    n, k = x.shape
    long = pandas.DataFrame(
        {
            "run": np.repeat(np.arange(n), k),
            "judge": np.tile(np.arange(k), n),
            "score": x.ravel(),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        icc = pingouin.intraclass_corr(data=long, targets="run", raters="judge", ratings="score")
    icc = icc.set_index("Type")["ICC"]
    row = rows_of(st.agreement_rows, unbalanced, seed=0)[0]
    assert row.n_complete_runs == n
    # pingouin ≥ 0.6 names Shrout-Fleiss ICC2 / ICC2k "ICC(A,1)" / "ICC(A,k)".
    assert row.icc2_1 == pytest.approx(icc["ICC(A,1)"], abs=1e-9)
    assert row.icc2_k == pytest.approx(icc["ICC(A,k)"], abs=1e-9)
    # Shrout & Fleiss (1979) Table 2 data: ICC(2,1) = 0.29, ICC(2,4) = 0.62.
    sf = np.array(
        [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]],
        dtype=float,
    )
    one, many = st.icc2(sf)
    assert (round(one, 2), round(many, 2)) == (0.29, 0.62)


def test_correlations_and_k_eff(unbalanced: st.Tables) -> None:
    s = _context(unbalanced).panel.judge_score
    x = s[~np.isnan(s).any(axis=1)]
    dev = np.corrcoef(x - x.mean(axis=1, keepdims=True), rowvar=False)
    raw = np.corrcoef(x, rowvar=False)
    pairs = {(c.judge_a, c.judge_b): c for c in rows_of(st.correlation_rows, unbalanced, seed=0)}
    assert pairs[("judge_a", "judge_c")].deviation_correlation == pytest.approx(dev[0, 2])
    assert pairs[("judge_b", "judge_c")].score_correlation == pytest.approx(raw[1, 2])
    row = rows_of(st.agreement_rows, unbalanced, seed=0)[0]
    rbar = raw[np.triu_indices(3, 1)].mean()
    assert row.mean_score_correlation == pytest.approx(rbar)
    assert row.k_eff == pytest.approx(3 / (1 + 2 * rbar))
    assert row.deviation_baseline == pytest.approx(-0.5)


def _explicit_ols(y: np.ndarray, z: np.ndarray, run: np.ndarray) -> np.ndarray:
    """Textbook OLS with one dummy per run (no intercept) next to Z; returns Z's coefficients."""
    runs = np.unique(run, return_inverse=True)[1]
    dummies = np.zeros((y.size, runs.max() + 1))
    dummies[np.arange(y.size), runs] = 1.0
    x = np.hstack([z, dummies])
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    return coef[: z.shape[1]]


def test_self_preference_matches_explicit_dummies(unbalanced: st.Tables) -> None:
    ctx = _context(unbalanced, seed=3, n_resamples=4)
    y, z, run, task, _ = design(ctx)
    f = fit(ctx)
    assert np.allclose(f.coef, _explicit_ols(y, z, run), atol=1e-9, rtol=0)
    # Each bootstrap refit equals OLS with dummies on the literally duplicated tasks.
    for b in range(ctx.counts.shape[0]):
        ys, zs, rs = [], [], []
        for t, w in enumerate(ctx.counts[b].astype(int)):
            sel = task == t
            for copy in range(w):
                ys.append(y[sel])
                zs.append(z[sel])
                rs.append(run[sel] + (copy + 1) * 10**6 * (t + 1))
        ref = _explicit_ols(np.concatenate(ys), np.vstack(zs), np.concatenate(rs))
        assert np.allclose(f.draws[b], ref, atol=1e-9, rtol=0)


def test_self_preference_recovers_planted_effects() -> None:
    tables = synthetic_tables(
        n_tasks=120,
        n_agents=9,
        base=4.5,
        self_preference={"judge_a": 1.5},
        judge_leniency={"judge_b": 2.0},
        seed=22,  # a fixed draw; across seeds the 95% CI covers 1.5 as often as it should
    )
    rows = {
        r.judge_id: r for r in rows_of(st.self_preference_rows, tables, seed=1, n_resamples=2000)
    }
    a, b, c = rows["judge_a"], rows["judge_b"], rows["judge_c"]
    assert a.ci_low < 1.5 < a.ci_high
    assert abs(a.coefficient - 1.5) < 4 * a.se
    assert b.ci_low < 0.0 < b.ci_high and abs(b.coefficient) < 0.15
    assert c.ci_low < 0.0 < c.ci_high
    assert b.leniency > 1.2  # leniency lands in the judge effect, not in self-preference
    assert a.n_own == 3 * 120 and a.n_other == 6 * 120
    # The naive "own family minus the other judges on the same runs" mistakes leniency
    # for self-preference: about +2 for judge_b.
    ctx = _context(tables)
    js = ctx.panel.judge_score
    own_b = np.array(ctx.panel.agent_families)[ctx.panel.run_agent] == "fam_b"
    naive = (js[own_b, 1] - js[own_b][:, [0, 2]].mean(axis=1)).mean()
    assert naive > 1.5


def test_strictness_shows_leniency() -> None:
    tables = synthetic_tables(n_tasks=60, n_agents=3, judge_leniency={"judge_c": 2.0}, seed=2)
    shares = {
        r.judge_id: r for r in rows_of(st.below_anchor_rows, tables, seed=0, n_resamples=1000)
    }
    assert shares["judge_c"].ci_high < min(shares["judge_a"].ci_low, shares["judge_b"].ci_low)
    assert shares[None].n_ratings == sum(
        shares[j].n_ratings for j in ("judge_a", "judge_b", "judge_c")
    )
