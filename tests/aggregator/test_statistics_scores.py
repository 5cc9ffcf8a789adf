"""Scores, pass rates, strictness, gap, tags: hand cases, scipy references, planted effects."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

from assay_report import statistics as st
from assay_report.statistics._bootstrap import Weigher, fixed_point, resample_counts, weigh
from assay_testing.synthetic_tables import synthetic_tables
from tests.aggregator.stats import rows_of

# Monte-Carlo tolerance for comparing our percentile CI with scipy's (independent
# resamples, B = 4000 each): an endpoint's MC SD is ≈ 2.7σ/√B ≈ 0.042σ (σ = bootstrap
# SD), the difference of two independent endpoints ≈ 0.06σ; 0.25σ is ≈ 4 of those.
B_REF = 4000
MC_TOL = 0.25


def build(entries: list[tuple[str, str, str, str, str, int, int]], **run_flags: bool) -> st.Tables:
    """Tables from (task, agent, run, judge, dimension, sample, score) tuples.

    ``run_flags`` maps run_id → infrastructure_failure.
    """
    rows = [
        {
            "campaign_id": "c",
            "task_id": t,
            "run_id": r,
            "agent_id": a,
            "agent_family": f"fam_{a}",
            "epoch": 0,
            "judge_id": j,
            "judge_family": f"fam_{j}",
            "sample": s,
            "dimension": d,
            "score": v,
            "domain": "",
            "phase": "",
            "difficulty": "",
        }
        for t, a, r, j, d, s, v in entries
    ]
    ratings = pl.DataFrame(rows)
    runs = (
        ratings.select("campaign_id", "task_id", "run_id", "agent_id", "agent_family", "epoch")
        .unique(maintain_order=True)
        .with_columns(
            domain=pl.lit(""),
            phase=pl.lit(""),
            difficulty=pl.lit(""),
            state=pl.lit("judged"),
            infrastructure_failure=pl.col("run_id").replace_strict(
                run_flags, default=False, return_dtype=pl.Boolean
            ),
            empty_artifacts=pl.lit(False),
            latency_s=pl.lit(1.0),
            cost_usd=pl.lit(0.1),
            steps=pl.lit(3),
            input_tokens=pl.lit(100),
            output_tokens=pl.lit(10),
            cached_tokens=pl.lit(0),
        )
    )
    return st.make_tables(ratings, runs)


@pytest.fixture(scope="module")
def hand() -> st.Tables:
    """2 agents × 3 tasks, one judge, one dimension; B's run on t3 failed (infra)."""
    e = [
        ("t1", "A", "r1", "j", "d", 0, 6),
        ("t1", "A", "r2", "j", "d", 0, 8),
        ("t2", "A", "r3", "j", "d", 0, 9),
        ("t3", "A", "r4", "j", "d", 0, 5),
        ("t1", "B", "r5", "j", "d", 0, 4),
        ("t2", "B", "r6", "j", "d", 0, 10),
        ("t3", "B", "r7", "j", "d", 0, 10),  # rated, but an infrastructure failure
    ]
    return build(e, r7=True)


def test_hand_agent_scores(hand: st.Tables) -> None:
    rows = {r.agent_id: r for r in rows_of(st.overall_score_rows, hand, seed=1, n_resamples=200)}
    # A: task means 7, 9, 5 → 7; s = 2, SE = 2/√3. B: tasks 4, 10 (t3 excluded) → 7.
    assert rows["A"].estimate == pytest.approx(7.0)
    assert rows["A"].se == pytest.approx(2 / np.sqrt(3))
    assert (rows["A"].n_tasks, rows["A"].n_runs) == (3, 4)
    assert rows["B"].estimate == pytest.approx(7.0)
    assert (rows["B"].n_tasks, rows["B"].n_runs) == (2, 2)
    assert rows["B"].se == pytest.approx(np.std([4, 10], ddof=1) / np.sqrt(2))
    acct = {r.agent_id: r for r in rows_of(st.accounting_rows, hand, seed=0)}
    assert (acct["B"].n_runs, acct["B"].n_scored, acct["B"].n_infrastructure_failures) == (3, 2, 1)


def test_hand_pass_rates_and_unpassed(hand: st.Tables) -> None:
    rows = {r.agent_id: r for r in rows_of(st.pass_rate_rows, hand, seed=1, n_resamples=200)}
    # A: t1 half its runs pass (6, 8), t2 passes, t3 fails → (0.5 + 1 + 0)/3.
    assert rows["A"].pass_rate == pytest.approx(0.5)
    assert rows["A"].n_passed == 2
    assert rows["B"].pass_rate == pytest.approx(0.5)
    for r in rows.values():  # never narrower than Wilson's at q·n of n
        lo, hi = proportion_confint(r.pass_rate * r.n_runs, r.n_runs, method="wilson")
        assert r.ci_low <= lo + 1e-12 and r.ci_high >= hi - 1e-12
    assert [u.task_id for u in rows_of(st.unpassed_task_rows, hand, seed=0)] == ["t3"]
    assert rows_of(st.unpassed_task_rows, hand, seed=0)[0].best_run_score == 5.0


def test_run_score_weighs_judges_equally() -> None:
    e = [
        ("t", "A", "r", "j1", "d1", 0, 4),
        ("t", "A", "r", "j1", "d2", 0, 6),
        ("t", "A", "r", "j1", "d1", 1, 6),
        ("t", "A", "r", "j1", "d2", 1, 8),
        ("t", "A", "r", "j2", "d1", 0, 9),
        ("t", "A", "r", "j2", "d2", 0, 9),
    ]
    tables = build(e)
    # j1 → 6, j2 → 9: run score 7.5 (not the pooled 7.0 of the six ratings).
    assert rows_of(st.overall_score_rows, tables, seed=0, n_resamples=10)[
        0
    ].estimate == pytest.approx(7.5)
    dims = {
        r.dimension: r.estimate
        for r in rows_of(st.dimension_score_rows, tables, seed=0, n_resamples=10)
    }
    assert dims == pytest.approx({"d1": (5 + 9) / 2, "d2": (7 + 9) / 2})
    board = {
        r.judge_id: r.estimate for r in rows_of(st.judge_score_rows, tables, seed=0, n_resamples=10)
    }
    assert board == pytest.approx({"j1": 6.0, "j2": 9.0})


def test_bootstrap_matches_literal_resampling(hand: st.Tables) -> None:
    """The count-matrix bootstrap equals recomputing the definition on drawn task lists."""
    seed, b = 7, 300
    rows = rows_of(st.overall_score_rows, hand, seed=seed, n_resamples=b, confidence=0.9)
    task_means = {"A": {0: 7.0, 1: 9.0, 2: 5.0}, "B": {0: 4.0, 1: 10.0}}
    idx = np.random.Generator(np.random.PCG64(seed)).integers(0, 3, size=(b, 3))
    for row in rows:
        m = task_means[row.agent_id]
        draws = []
        for drawn in idx:
            vals = [m[t] for t in drawn if t in m]
            draws.append(np.mean(vals) if vals else np.nan)
        d = np.array(draws)
        d = d[~np.isnan(d)]
        assert row.ci_low == pytest.approx(np.quantile(d, 0.05), abs=1e-12)
        assert row.ci_high == pytest.approx(np.quantile(d, 0.95), abs=1e-12)
    counts = resample_counts(seed, b, 3)
    assert (counts.sum(axis=1) == 3).all()


@pytest.fixture(scope="module")
def planted() -> st.Tables:
    return synthetic_tables(
        n_tasks=60,
        n_agents=4,
        n_epochs=2,
        base=5.0,
        judge_leniency={"judge_b": 2.0},
        communication_gap={"agent_3": 2.0},
        overclaim_rate={"agent_0": 0.4},
        infrastructure_failure_rate=0.05,
        seed=3,
    )


def _task_ratio(y: np.ndarray, x: np.ndarray, seed: int) -> tuple[float, float]:
    """scipy.stats.bootstrap percentile CI of Σy/Σx resampling task indices."""

    def stat(i: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.asarray(y[i].sum(axis=axis) / x[i].sum(axis=axis))

    res = stats.bootstrap(
        (np.arange(y.size),),
        stat,
        method="percentile",
        n_resamples=B_REF,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _rate_ci(y: np.ndarray, x: np.ndarray, seed: int) -> tuple[float, float]:
    """A rate's interval: the hull of scipy's task bootstrap and statsmodels' Wilson
    interval at the pooled counts (Clopper–Pearson's at 0 or n)."""
    k, n = y.sum(), x.sum()
    lo, hi = _task_ratio(y, x, seed)
    blo, bhi = proportion_confint(k, n, method="beta" if k in (0, n) else "wilson")
    return min(lo, blo), max(hi, bhi)


def _check_ci(lo: float, hi: float, ref: tuple[float, float], sd: float) -> None:
    assert abs(lo - ref[0]) <= MC_TOL * sd
    assert abs(hi - ref[1]) <= MC_TOL * sd


def _per_task(df: pl.DataFrame, tasks: list[str], value: str, den: str) -> tuple[np.ndarray, ...]:
    full = pl.DataFrame({"task_id": tasks}).join(df, on="task_id", how="left").fill_null(0)
    return full[value].to_numpy().astype(float), full[den].to_numpy().astype(float)


def test_agent_scores_against_scipy(planted: st.Tables) -> None:
    ok = planted.runs.filter(~pl.col("infrastructure_failure")).select("run_id")
    r = planted.ratings.join(ok, on="run_id", how="semi")
    judge_run = r.group_by("task_id", "agent_id", "run_id", "judge_id").agg(pl.col("score").mean())
    run = judge_run.group_by("task_id", "agent_id", "run_id").agg(pl.col("score").mean())
    cell = run.group_by("task_id", "agent_id").agg(pl.col("score").mean())
    tasks = sorted(planted.runs.filter(~pl.col("infrastructure_failure"))["task_id"].unique())
    rows = rows_of(st.overall_score_rows, planted, seed=11, n_resamples=B_REF)
    for row in rows:
        mine = cell.filter(pl.col("agent_id") == row.agent_id).with_columns(one=pl.lit(1.0))
        y, x = _per_task(mine, tasks, "score", "one")
        assert row.estimate == pytest.approx(y.sum() / x.sum(), abs=1e-12)
        m = y[x > 0]
        assert row.se == pytest.approx(m.std(ddof=1) / np.sqrt(m.size), rel=1e-12)
        _check_ci(row.ci_low, row.ci_high, _task_ratio(y, x, 5), row.se)


def test_below_anchor_and_pass_rate_against_scipy(planted: st.Tables) -> None:
    ok = planted.runs.filter(~pl.col("infrastructure_failure")).select("run_id")
    r = planted.ratings.join(ok, on="run_id", how="semi")
    tasks = sorted(planted.runs.filter(~pl.col("infrastructure_failure"))["task_id"].unique())
    shares = {
        s.judge_id: s for s in rows_of(st.below_anchor_rows, planted, seed=2, n_resamples=B_REF)
    }
    for judge in [None, "judge_a", "judge_b"]:
        sub = r if judge is None else r.filter(pl.col("judge_id") == judge)
        per = sub.group_by("task_id").agg((pl.col("score") < 8).sum().alias("b"), pl.len())
        y, x = _per_task(per, tasks, "b", "len")
        row = shares[judge]
        assert row.share == pytest.approx(y.sum() / x.sum(), abs=1e-12)
        assert row.n_ratings == x.sum()
        _check_ci(row.ci_low, row.ci_high, _rate_ci(y, x, 6), row.se)
    # Planted leniency (+2 for judge_b) shows as fewer ratings below the anchor.
    assert shares["judge_b"].ci_high < shares["judge_a"].ci_low
    assert shares["judge_b"].ci_high < shares["judge_c"].ci_low


def test_communication_gap_planted(planted: st.Tables) -> None:
    gap = {
        g.agent_id: g for g in rows_of(st.communication_gap_rows, planted, seed=4, n_resamples=2000)
    }
    assert gap["agent_3"].ci_low < 2.0 < gap["agent_3"].ci_high
    assert gap["agent_0"].ci_low < 0.0 < gap["agent_0"].ci_high
    g = gap["agent_3"]
    assert g.gap == pytest.approx(g.communication - g.scientific_accuracy)
    dims = {
        (d.agent_id, d.dimension): d.estimate
        for d in rows_of(st.dimension_score_rows, planted, seed=4, n_resamples=10)
    }
    assert g.communication == pytest.approx(dims[("agent_3", "communication")])


def test_tag_rates_against_scipy(planted: st.Tables) -> None:
    rows = rows_of(
        partial(st.tag_rate_rows, tags=("fabricated_results",)), planted, seed=8, n_resamples=B_REF
    )
    assert rows[0].tag == "overclaiming"
    assert {r.tag for r in rows} == {"overclaiming", "no_artifacts", "fabricated_results"}
    ok = planted.runs.filter(~pl.col("infrastructure_failure")).select("run_id")
    verdicts = (
        planted.ratings.join(ok, on="run_id", how="semi")
        .select("task_id", "agent_id", "run_id", "judge_id", "sample")
        .unique()
    )
    tasks = sorted(planted.runs.filter(~pl.col("infrastructure_failure"))["task_id"].unique())
    over = planted.tags.filter(pl.col("tag") == "overclaiming").select(
        "run_id", "judge_id", "sample", pl.lit(1).alias("hit")
    )
    v = verdicts.join(over, on=["run_id", "judge_id", "sample"], how="left").fill_null(0)
    for row in rows:
        if row.tag != "overclaiming":
            continue
        per = (
            v.filter(pl.col("agent_id") == row.agent_id)
            .group_by("task_id")
            .agg(pl.col("hit").sum(), pl.len())
        )
        y, x = _per_task(per, tasks, "hit", "len")
        assert row.rate == pytest.approx(y.sum() / x.sum(), abs=1e-12)
        _check_ci(row.ci_low, row.ci_high, _rate_ci(y, x, 9), row.se)
    by_agent = {r.agent_id: r.rate for r in rows if r.tag == "overclaiming"}
    assert by_agent["agent_0"] > 0.3 > by_agent["agent_1"]
    never = [r for r in rows if r.tag == "fabricated_results"]
    assert never and all(r.rate == 0 for r in never)
    for r in never:  # 0 of n: Clopper–Pearson's interval, not a zero-width one
        assert (r.ci_low, r.ci_high) == pytest.approx(
            proportion_confint(0, r.n_verdicts, method="beta"), abs=1e-12
        )


def test_tag_hand_case() -> None:
    e = [("t", "A", "r", "j", "d", s, 5) for s in (0, 1)] + [
        ("t", "A", "r2", "j", "d", s, 5) for s in (0, 1)
    ]
    base = build(e)
    tags = pl.DataFrame(
        {
            "campaign_id": ["c"] * 4,
            "task_id": ["t"] * 4,
            "run_id": ["r", "r", "r2", "r9"],
            "agent_id": ["A"] * 4,
            "judge_id": ["j"] * 4,
            "sample": [0, 0, 1, 0],  # a duplicate row, and a verdict that does not exist
            "tag": ["overclaiming", "overclaiming", "no_uncertainty", "overclaiming"],
        }
    )
    t = st.make_tables(base.ratings, base.runs, tags)
    rates = {
        r.tag: (r.rate, r.n_tagged, r.n_verdicts) for r in rows_of(st.tag_rate_rows, t, seed=0)
    }
    assert rates == {"overclaiming": (0.25, 1, 4), "no_uncertainty": (0.25, 1, 4)}


def test_empty_artifact_rate_hand() -> None:
    e = [("t1", "A", f"r{i}", "j", "d", 0, 5) for i in range(4)]
    t = build(e)
    runs = t.runs.with_columns(empty_artifacts=pl.col("run_id").is_in(["r0"]))
    rows = rows_of(st.empty_artifact_rows, st.make_tables(t.ratings, runs), seed=0, n_resamples=50)
    assert (rows[0].rate, rows[0].n_empty, rows[0].n_runs) == (0.25, 1, 4)


def test_infrastructure_failures_do_not_score(planted: st.Tables) -> None:
    """Ratings attached to infrastructure-failed runs change nothing."""
    failed = planted.runs.filter(pl.col("infrastructure_failure"))
    assert failed.height > 0
    fake = planted.ratings.head(failed.height).with_columns(
        run_id=failed["run_id"], task_id=failed["task_id"], score=pl.lit(0, dtype=pl.Int64)
    )
    noisy = st.make_tables(pl.concat([planted.ratings, fake]), planted.runs, planted.tags)
    a = rows_of(st.overall_score_rows, planted, seed=1, n_resamples=100)
    b = rows_of(st.overall_score_rows, noisy, seed=1, n_resamples=100)
    assert a == b


@pytest.mark.parametrize(("b", "t"), [(50_000, 3), (5, 70_000), (1, 1), (4, 0)])
def test_resample_counts_are_one_draw_of_t_indices_per_resample(b: int, t: int) -> None:
    """By hand: resample b draws T task indices (the generator's next T), counted.

    The shapes span several of the function's blocks of rows (many short rows, rows
    longer than a block) and the degenerate ones."""
    rng = np.random.Generator(np.random.PCG64(11))
    want = np.zeros((b, t))
    if t:
        for row in range(b):
            want[row] = np.bincount(rng.integers(0, t, size=t), minlength=t)
    got = resample_counts(11, b, t)
    assert got.dtype == (np.uint16 if t <= 65_535 else np.uint32)  # exact, and small
    assert np.array_equal(got, want)


@pytest.mark.parametrize(("b", "t", "k"), [(2_500, 40, 3), (1_024, 7, 1), (3, 5, 2), (0, 4, 2)])
def test_weigh_is_the_float64_product_of_the_counts(b: int, t: int, k: int) -> None:
    """By hand: row b of ``weigh(W, M)`` is sum_t W[b, t] * M[t, :], in float64, over every
    block of rows (2,500 resamples span three blocks)."""
    counts = resample_counts(5, b, t)
    m = np.random.default_rng(3).normal(size=(t, k))
    got = weigh(counts, m)
    assert got.dtype == np.float64 and got.shape == (b, k)
    for row in range(b):
        want = [sum(float(counts[row, i]) * m[i, j] for i in range(t)) for j in range(k)]
        assert got[row] == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_weigh_multiplies_a_repeated_column_once_and_gives_it_to_every_place() -> None:
    """A ratio's denominators are often one column repeated (each judgment scores every
    dimension): `weigh` multiplies it once. Every place still gets the product, by hand,
    and the repeated places the same bits; a column equal except in its last bit, or a
    NaN in one place, is a column of its own (the nudge is finer than the grid of
    `fixed_point`, so its exact product is a's)."""
    counts = resample_counts(9, 1_500, 30)
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=30), rng.normal(size=30)
    nudged = np.nextafter(a, np.inf)
    with_nan = a.copy()
    with_nan[3] = np.nan
    m = np.column_stack([a, b, a, nudged, b, with_nan, a])
    got = weigh(counts, m)
    assert got.shape == (1_500, 7)
    want = counts.astype(np.float64) @ m
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)
    assert np.array_equal(got[:, 0], got[:, 2]) and np.array_equal(got[:, 0], got[:, 6])
    assert np.array_equal(got[:, 1], got[:, 4])
    assert np.array_equal(got[:, 3], weigh(counts, nudged[:, None])[:, 0])
    assert np.isnan(got[:, 5]).all() and np.isfinite(got[:, 0]).all()


@pytest.mark.parametrize(("b", "t", "k"), [(2_500, 40, 5), (300, 1_780, 4), (7, 1, 2)])
def test_weigh_is_exact_on_its_grid_whatever_the_pass(b: int, t: int, k: int) -> None:
    """The products are exact: on the grid of `fixed_point` they equal numpy's int64
    product of the same integers (an independent, exact computation), and so the bits do
    not depend on how the columns are grouped into passes, on the order of the tasks, or
    on whether a few tasks' new values are added to a product made before."""
    counts = resample_counts(8, b, t)
    rng = np.random.default_rng(12)
    m = np.column_stack(
        [
            rng.normal(size=t) * 10.0 ** rng.integers(-300, 300),
            rng.integers(0, 80_000, size=t).astype(np.float64),  # token counts
            rng.random(size=t) * 1e-12,
            np.zeros(t),
            *(rng.normal(size=(t, k - 4)).T if k > 4 else []),
        ]
    )[:, :k]
    grid, scale = fixed_point(m, t)
    exact = counts.astype(np.int64) @ grid.astype(np.int64)
    assert np.abs(exact).max(initial=0) < 2**53
    got = weigh(counts, m)
    assert np.array_equal(got, np.ldexp(exact.astype(np.float64), -scale))
    narrow = np.column_stack([weigh(counts, m[:, [j]]) for j in range(k)])
    assert np.array_equal(narrow, got)
    order = rng.permutation(t)
    assert np.array_equal(weigh(counts[:, order], m[order]), got)
    # A few tasks change (on the same grid): the old product plus theirs is the new one.
    changed = rng.choice(t, size=max(1, t // 10), replace=False)
    moved = grid.copy()
    moved[changed] += rng.integers(-1000, 1000, size=(changed.size, k))
    moved[:, scale == 0] = grid[:, scale == 0]  # the zero column has no grid to stay on
    new = np.ldexp(moved, -scale)
    assert np.array_equal(fixed_point(new, t)[1], scale)
    added = counts.astype(np.int64) @ grid.astype(np.int64) + counts[:, changed].astype(
        np.int64
    ) @ (moved - grid)[changed].astype(np.int64)
    assert np.array_equal(weigh(counts, new), np.ldexp(added.astype(np.float64), -scale))


def test_weighs_grid_moves_a_product_by_less_than_its_bound() -> None:
    """By hand, in exact rational arithmetic: the product of the values as given and the
    product on the grid differ by at most T² · 2**-52 of the column's largest value, the
    bound `fixed_point` states (a value moves at most T · 2**-52 of it)."""
    from fractions import Fraction

    t = 30
    counts = resample_counts(3, 40, t)
    rng = np.random.default_rng(5)
    m = np.column_stack([rng.normal(size=t) / 3, rng.random(size=t) * 1e9 + 0.1])
    got = weigh(counts, m)
    for j in range(m.shape[1]):
        top = float(np.abs(m[:, j]).max())
        for row in range(counts.shape[0]):
            want = sum(Fraction(int(counts[row, i])) * Fraction(m[i, j]) for i in range(t))
            assert abs(Fraction(got[row, j]) - want) <= Fraction(t * t * top) / 2**52


def test_a_weigher_multiplies_each_column_once_over_many_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A context's estimates ask again for columns already weighed (an agent's denominators
    in every estimate of it): the weigher multiplies only columns it has not seen; each
    answer is the product by hand, the same bits wherever a column recurs, and the same
    bits again for the same asks in any order (the products are exact)."""
    from assay_report.statistics import _bootstrap

    counts = resample_counts(9, 2_500, 40)
    rng = np.random.default_rng(6)
    a, b, c = rng.normal(size=40), rng.normal(size=40), rng.normal(size=40)
    nudged = np.nextafter(a, np.inf)
    asks = [
        np.column_stack([a, b]),
        np.column_stack([b, a, a]),  # nothing new: no product at all
        np.column_stack([c, a, nudged]),  # two new columns, one known
        np.zeros((40, 0)),
    ]
    multiplied: list[int] = []

    def spy(counts_: Any, m: Any, row_sum: Any = None) -> Any:
        multiplied.append(m.shape[1])
        return weigh(counts_, m, row_sum)

    monkeypatch.setattr(_bootstrap, "weigh", spy)
    weigher = Weigher(counts)
    got = [weigher(m) for m in asks]
    assert multiplied == [2, 2]  # a and b; then c and the nudged a
    monkeypatch.setattr(_bootstrap, "weigh", weigh)
    for m, answer in zip(asks, got, strict=True):
        assert answer.shape == (2_500, m.shape[1]) and answer.dtype == np.float64
        want = counts.astype(np.float64) @ m
        assert np.allclose(answer, want, rtol=1e-12, atol=1e-12)
    known = {
        col.tobytes(): place
        for m, answer in zip(asks, got, strict=True)
        for col, place in zip(m.T, answer.T, strict=True)
    }
    for m, answer in zip(asks, got, strict=True):
        for col, place in zip(m.T, answer.T, strict=True):
            assert np.array_equal(place, known[col.tobytes()])  # one product per column
    again = Weigher(counts)
    pairs = list(zip(asks, got, strict=True))[::-1]
    assert all(np.array_equal(again(m), answer) for m, answer in pairs)
