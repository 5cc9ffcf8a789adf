"""Attacks: statistics that were NaN, arbitrary or not summing up without a word (issue #24).

Each case is a planted dataset; the test pins the numbers against an independent
implementation (pingouin, statsmodels, scipy, numpy) or a hand computation, and the
warning text the report now carries.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import polars as pl
import pytest

from assay_report import statistics as st
from assay_testing.synthetic_tables import synthetic_tables
from tests.aggregator.stats import rows_of

with warnings.catch_warnings():  # third-party imports may warn on newer pandas/numpy
    warnings.simplefilter("ignore")
    import pandas
    import pingouin
    import statsmodels.api as sm
    from scipy import stats as sps


def _report(tables: st.Tables, **kw: object) -> st.StatisticsReport:
    return st.compute_statistics(tables, st.AnalysisSettings(seed=1, n_resamples=200, **kw))  # type: ignore[arg-type]


def _warnings(rep: st.StatisticsReport) -> dict[tuple[str, str], st.StatisticsWarning]:
    return {(w.kind, w.subject): w for w in rep.warnings}


def _keep_judge_on(t: st.Tables, judge: str, runs: list[str]) -> st.Tables:
    """The tables with ``judge``'s ratings kept only on ``runs`` (a flaky judge)."""
    gone = (pl.col("judge_id") == judge) & ~pl.col("run_id").is_in(runs)
    return st.make_tables(t.ratings.filter(~gone), t.runs, t.tags)


def _pingouin_icc(x: np.ndarray) -> tuple[float, float]:
    n, k = x.shape
    long = pandas.DataFrame(
        {"run": np.repeat(np.arange(n), k), "judge": np.tile(np.arange(k), n), "score": x.ravel()}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        icc = pingouin.intraclass_corr(data=long, targets="run", raters="judge", ratings="score")
    icc = icc.set_index("Type")["ICC"]
    return float(icc["ICC(A,1)"]), float(icc["ICC(A,k)"])


# --- finding 11: one flaky judge made the panel statistics NaN -------------------------


@pytest.fixture(scope="module")
def flaky() -> st.Tables:
    """Three judges on 30 tasks × 3 agents; judge_c gave a single verdict."""
    t = synthetic_tables(n_tasks=30, n_agents=3, seed=2)
    return _keep_judge_on(t, "judge_c", [t.runs["run_id"].sort()[0]])


def test_flaky_judge_is_dropped_from_icc_and_correlations_and_named(flaky: st.Tables) -> None:
    rep = _report(flaky)
    [agree] = rep.judge_agreement
    ctx = next(st.contexts(flaky, st.AnalysisSettings(seed=1)))
    x = ctx.panel.judge_score[:, :2]  # judge_a and judge_b scored every run
    assert not np.isnan(x).any() and x.shape[0] == 90
    one, many = _pingouin_icc(x)
    assert agree.icc2_1 == pytest.approx(one, abs=1e-9)
    assert agree.icc2_k == pytest.approx(many, abs=1e-9)
    assert agree.n_complete_runs == 90
    r = float(np.asarray(np.corrcoef(x, rowvar=False))[0, 1])
    assert agree.mean_score_correlation == pytest.approx(r)
    assert agree.k_eff == pytest.approx(2 / (1 + r))  # k = 2 judges left
    assert agree.deviation_baseline == -1.0
    pairs = {(c.judge_a, c.judge_b): c for c in rep.judge_correlations}
    assert pairs[("judge_a", "judge_b")].score_correlation == pytest.approx(r)
    assert pairs[("judge_a", "judge_b")].n_runs == 90
    dropped = pairs[("judge_a", "judge_c")]
    assert math.isnan(dropped.score_correlation) and dropped.n_runs == 0
    w = _warnings(rep)[("judge_dropped_from_panel", "judge_c")]
    assert w.message == (
        "judge judge_c scored only 1 of 90 runs, which left 1 run(s) scored by every judge "
        "(fewer than 10): it is left out of ICC, k_eff and the judge correlations, computed "
        "on the 90 runs judges judge_a, judge_b all scored"
    )
    assert {"judge_agreement", "judge_correlations"} <= set(w.affects)


@pytest.mark.parametrize("n_verdicts, dropped", [(3, True), (9, True), (60, False)])
def test_a_judge_with_few_verdicts_is_dropped_only_while_few_runs_are_complete(
    n_verdicts: int, dropped: bool
) -> None:
    """Class: a few verdicts leave ICC defined but resting on a handful of runs."""
    t = synthetic_tables(n_tasks=30, n_agents=3, seed=2)
    t = _keep_judge_on(t, "judge_c", t.runs["run_id"].sort().to_list()[:n_verdicts])
    rep = _report(t)
    assert (("judge_dropped_from_panel", "judge_c") in _warnings(rep)) is dropped
    assert rep.judge_agreement[0].n_complete_runs == (90 if dropped else n_verdicts)


def test_a_small_campaign_with_one_missing_verdict_keeps_every_judge() -> None:
    """Four runs, judge_c missed one: it scored most runs, so it stays (ICC on 3 runs)."""
    t = synthetic_tables(n_tasks=2, n_agents=2, seed=2)
    runs = t.runs["run_id"].sort().to_list()
    rep = _report(_keep_judge_on(t, "judge_c", runs[1:]))
    assert not [w for w in rep.warnings if w.kind == "judge_dropped_from_panel"]
    [agree] = rep.judge_agreement
    assert agree.n_complete_runs == 3 and not math.isnan(agree.icc2_1)


def test_judges_on_disjoint_runs_drop_the_one_with_fewer_runs_only() -> None:
    """Class: two flaky judges; the one with fewer verdicts goes, the other stays."""
    t = synthetic_tables(n_tasks=30, n_agents=3, seed=2)
    runs = t.runs["run_id"].sort().to_list()
    t = _keep_judge_on(t, "judge_b", runs[:50])
    t = _keep_judge_on(t, "judge_c", runs[50:])
    rep = _report(t)
    w = _warnings(rep)
    assert ("judge_dropped_from_panel", "judge_c") in w
    assert ("judge_dropped_from_panel", "judge_b") not in w
    [agree] = rep.judge_agreement
    assert agree.n_complete_runs == 50 and not math.isnan(agree.icc2_1)


def test_single_judge_left_keeps_nan_and_says_why() -> None:
    """Class: nothing left to compare; the NaN stays and the warning gives the reason."""
    t = synthetic_tables(
        n_tasks=10, n_agents=2, seed=2, judges=[("judge_a", "f"), ("judge_b", "g")]
    )
    runs = t.runs["run_id"].sort().to_list()
    t = _keep_judge_on(t, "judge_b", runs[:1])
    rep = _report(t)
    [agree] = rep.judge_agreement
    assert math.isnan(agree.icc2_1) and math.isnan(agree.k_eff)
    w = _warnings(rep)[("panel_statistics_undefined", "")]
    assert w.message == (
        "ICC, k_eff and the judge correlations are undefined: judge judge_b scored only 1 of "
        "20 runs, and fewer than 2 judges remain without it"
    )


def test_complete_panel_is_unchanged_and_silent() -> None:
    t = synthetic_tables(n_tasks=30, n_agents=3, seed=2)
    rep = _report(t)
    kinds = {w.kind for w in rep.warnings}
    assert not kinds & {"judge_dropped_from_panel", "panel_statistics_undefined"}
    assert rep.judge_agreement[0].n_complete_runs == 90


# --- finding 12: self-preference reported where it is not identified -------------------


def _same_family(a: str = "judge_a", b: str = "judge_b") -> st.Tables:
    return synthetic_tables(
        n_tasks=30,
        n_agents=4,
        judges=[(a, "fam_x"), (b, "fam_x")],
        agent_families=["fam_x", "fam_y", "fam_x", "fam_y"],
        self_preference={a: 1.0},
        seed=4,
    )


def test_two_judges_of_one_family_get_no_coefficient_whatever_their_names() -> None:
    for a, b in (("judge_a", "judge_b"), ("judge_z", "judge_b")):
        rep = _report(_same_family(a, b))
        for row in rep.self_preference:
            assert math.isnan(row.coefficient) and math.isnan(row.se)
            assert math.isnan(row.ci_low) and math.isnan(row.ci_high)
        w = _warnings(rep)[("self_preference_not_identified", "fam_x")]
        judges = ", ".join(sorted((a, b)))
        assert w.message == (
            f"self-preference of family fam_x (judges {judges}) is not identified: no judge "
            "of another family scored its agents' runs, so its judges' own-family effect "
            "cannot be told from the runs' quality; no coefficient is reported"
        )
        assert w.affects == ("self_preference",)


def test_identified_coefficients_match_statsmodels_and_do_not_depend_on_names() -> None:
    """Two judges of one family plus one of another: all identified, order-free."""

    def fitted(names: tuple[str, str, str]) -> dict[str, tuple[float, float]]:
        a, b, c = names
        t = synthetic_tables(
            n_tasks=30,
            n_agents=3,
            judges=[(a, "fam_x"), (b, "fam_x"), (c, "fam_y")],
            agent_families=["fam_x", "fam_y", "fam_z"],
            self_preference={a: 1.0},
            judge_leniency={c: 0.5},
            seed=6,
        )
        rows = rows_of(st.self_preference_rows, t, seed=1, n_resamples=50)
        return {r.judge_id: (r.coefficient, r.leniency) for r in rows}

    plain = fitted(("judge_a", "judge_b", "judge_c"))
    renamed = fitted(("judge_z", "judge_b", "judge_c"))  # judge_a sorts last now
    assert plain["judge_a"] == pytest.approx(renamed["judge_z"], abs=1e-9)
    assert plain["judge_b"] == pytest.approx(renamed["judge_b"], abs=1e-9)
    assert plain["judge_c"] == pytest.approx(renamed["judge_c"], abs=1e-9)
    assert not any(math.isnan(v) for v, _ in plain.values())

    # statsmodels: judge dummies (judge_a as reference), own-family dummies, run dummies.
    t = synthetic_tables(
        n_tasks=30,
        n_agents=3,
        judges=[("judge_a", "fam_x"), ("judge_b", "fam_x"), ("judge_c", "fam_y")],
        agent_families=["fam_x", "fam_y", "fam_z"],
        self_preference={"judge_a": 1.0},
        judge_leniency={"judge_c": 0.5},
        seed=6,
    )
    ctx = next(st.contexts(t, st.AnalysisSettings(seed=1)))
    p = ctx.panel
    r_idx, j_idx = np.nonzero(~np.isnan(p.judge_score))
    fam = np.array(p.agent_families)[p.run_agent[r_idx]]
    own = fam == np.array(p.judge_families)[j_idx]
    x = pandas.DataFrame(
        {
            "y": p.judge_score[r_idx, j_idx],
            "run": r_idx.astype(str),
            "judge": np.array(p.judge_ids)[j_idx],
            **{f"own_{j}": (own & (j_idx == k)).astype(float) for k, j in enumerate(p.judge_ids)},
        }
    )
    design = pandas.get_dummies(x[["run", "judge"]], drop_first=False, dtype=float)
    design = design.drop(columns=["judge_judge_a"])
    design = pandas.concat([design, x[[c for c in x if c.startswith("own_")]]], axis=1)
    ols = sm.OLS(x["y"], design).fit()
    for j in p.judge_ids:
        assert plain[j][0] == pytest.approx(ols.params[f"own_{j}"], abs=1e-8)


def test_two_agent_families_for_two_judge_families_identify_no_gamma() -> None:
    """Class: other-family judges are there, yet with agents of only the two judge
    families each γ is confounded with another judge's leniency; an explicit
    run-dummy design (numpy rank test) agrees, and the warning gives that reason."""
    t = synthetic_tables(
        n_tasks=20,
        n_agents=2,
        judges=[("judge_a", "fam_x"), ("judge_b", "fam_x"), ("judge_c", "fam_y")],
        agent_families=["fam_x", "fam_y"],
        seed=3,
    )
    rep = _report(t)
    assert all(math.isnan(r.coefficient) for r in rep.self_preference)
    w = _warnings(rep)
    assert w[("self_preference_not_identified", "fam_y")].message == (
        "self-preference of family fam_y (judges judge_c) is not identified: its judges' "
        "own-family effect cannot be told apart from the runs' quality and the judges' "
        "leniency in these data; no coefficient is reported"
    )
    assert ("self_preference_not_identified", "fam_x") in w
    ctx = next(st.contexts(t, st.AnalysisSettings(seed=1)))
    p = ctx.panel
    r_idx, j_idx = np.nonzero(~np.isnan(p.judge_score))
    own = np.array(p.agent_families)[p.run_agent[r_idx]] == np.array(p.judge_families)[j_idx]
    x = np.zeros((r_idx.size, len(p.run_ids) + 2 + 3))
    x[np.arange(r_idx.size), r_idx] = 1.0  # run dummies
    for k in (1, 2):
        x[j_idx == k, len(p.run_ids) + k - 1] = 1.0  # judge dummies, judge_a the reference
    for k in range(3):
        x[own & (j_idx == k), len(p.run_ids) + 2 + k] = 1.0  # own-family indicators
    rank = np.linalg.matrix_rank(x)
    for k in range(3):
        e = np.zeros(x.shape[1])
        e[len(p.run_ids) + 2 + k] = 1.0
        assert np.linalg.matrix_rank(np.vstack([x, e])) > rank  # γ_k not estimable


# --- finding 14: ties at the top got P(rank 1) = 0 ---------------------------------------


def _twins() -> st.Tables:
    """agent_1 is an exact copy of agent_0 (same ratings on the same tasks); both top."""
    t = synthetic_tables(n_tasks=12, n_agents=3, agent_skill=[2.0, 2.0, -2.0], seed=8)
    key = ["task_id", "epoch", "judge_id", "sample", "dimension"]
    zero = t.ratings.filter(pl.col("agent_id") == "agent_0").select(
        *key, pl.col("score").alias("s0")
    )
    ratings = (
        t.ratings.join(zero, on=key, how="left")
        .with_columns(score=pl.when(pl.col("agent_id") == "agent_1").then("s0").otherwise("score"))
        .drop("s0")
    )
    return st.make_tables(ratings, t.runs, t.tags)


def test_tied_top_agents_share_p_rank_1_and_the_column_sums_to_one() -> None:
    tables = _twins()
    ranks = {r.agent_id: r for r in rows_of(st.rank_rows, tables, seed=1, n_resamples=300)}
    assert ranks["agent_0"].p_rank_1 == 0.5 and ranks["agent_1"].p_rank_1 == 0.5
    assert sum(r.p_rank_1 for r in ranks.values()) == pytest.approx(1.0, abs=1e-12)
    # scipy: average ranks put both twins at 1.5 in every resample.
    ctx = next(st.contexts(tables, st.AnalysisSettings(seed=1, n_resamples=300)))
    draws = ctx.overall.draws
    avg = sps.rankdata(-draws, axis=1, method="average")
    assert (avg[:, 0] == 1.5).all() and (avg[:, 1] == 1.5).all()


def test_p_rank_1_by_hand_on_partial_ties() -> None:
    """Three resamples: a wins, a and b tie, all three tie → (1 + 1/2 + 1/3) / 3 for a."""
    scores = np.array([[3.0, 1.0, 0.0], [2.0, 2.0, 1.0], [5.0, 5.0, 5.0]])
    from assay_report.statistics._ranking import top_shares

    share = top_shares(scores)
    expected = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]]
    np.testing.assert_allclose(share, expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(share.mean(axis=0), [11 / 18, 5 / 18, 2 / 18], atol=1e-15)


# --- finding 13 (statistics side): NaN, infinite or negative costs and durations --------


@pytest.mark.parametrize("column", ["cost_usd", "latency_s"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), -1.0])
def test_runs_table_refuses_non_finite_or_negative_costs(column: str, bad: float) -> None:
    t = synthetic_tables(n_tasks=3, n_agents=2, seed=1)
    first = pl.col("run_id") == t.runs["run_id"].sort()[0]
    runs = t.runs.with_columns(pl.when(first).then(bad).otherwise(pl.col(column)).alias(column))
    with pytest.raises(
        st.StatisticsInputError, match=f"column {column!r}.*finite and non-negative"
    ):
        st.make_tables(t.ratings, runs, t.tags)


def test_judge_costs_refuse_non_finite_and_clamp_cached_tokens() -> None:
    bad = pl.DataFrame(
        {
            "judge_id": ["a"],
            "input_tokens": [10],
            "output_tokens": [1],
            "cached_tokens": [0],
            "cost_usd": [float("nan")],
        }
    )
    with pytest.raises(st.StatisticsInputError, match="cost_usd"):
        st.judge_cost_rows(bad)
    over = bad.with_columns(cached_tokens=pl.lit(25), cost_usd=pl.lit(0.5))
    rows = {r.metric: r for r in st.judge_cost_rows(over)}
    assert rows["cached_tokens"].total == 10  # never more than the input tokens


def test_cached_tokens_above_input_are_clamped_in_run_costs() -> None:
    t = synthetic_tables(n_tasks=3, n_agents=1, seed=1)
    runs = t.runs.with_columns(input_tokens=pl.lit(100), cached_tokens=pl.lit(250))
    rep = _report(st.make_tables(t.ratings, runs, t.tags))
    cached = next(r for r in rep.run_costs if r.metric == "cached_tokens")
    assert (cached.mean, cached.p50, cached.p95) == (100.0, 100.0, 100.0)


def test_resamples_without_a_sparse_agent_are_counted_and_named() -> None:
    """Class (other silent gaps): ranks need every agent in a resample; say how many lacked one."""
    t = synthetic_tables(n_tasks=12, n_agents=3, seed=8)
    sparse = (pl.col("agent_id") == "agent_2") & (pl.col("task_id") != "task_0000")
    tables = st.make_tables(t.ratings.filter(~sparse), t.runs, t.tags)
    rep = _report(tables)
    ctx = next(st.contexts(tables, st.AnalysisSettings(seed=1, n_resamples=200)))
    lost = int((ctx.counts[:, 0] == 0).sum())  # resamples that never drew task_0000
    assert 0 < lost < 200
    w = _warnings(rep)[("rank_resamples_left_out", "")]
    assert w.message == (
        f"{lost} of 200 resamples are left out of the rank distribution because they drew "
        "no scored task of agent_2 (1 of 12 tasks): rank intervals, mean ranks and P(rank 1) "
        "hold for the resamples that drew them"
    )
    assert sum(r.p_rank_1 for r in rep.agent_ranks) == pytest.approx(1.0, abs=1e-12)


# --- round two: a judge with no own-family run, judges left out of the panel ------------


def test_a_judge_without_own_family_runs_is_named_once() -> None:
    """judge_c's family has no agent: its coefficient is NaN and one warning says why."""
    t = synthetic_tables(
        n_tasks=12,
        n_agents=2,
        judges=[("judge_a", "fam_x"), ("judge_b", "fam_y"), ("judge_c", "fam_z")],
        agent_families=["fam_x", "fam_y"],
        seed=5,
    )
    rep = _report(t)
    row = next(r for r in rep.self_preference if r.judge_id == "judge_c")
    assert row.n_own == 0 and math.isnan(row.coefficient)
    mine = [w for w in rep.warnings if w.subject in ("judge_c", "fam_z")]
    assert [(w.kind, w.message) for w in mine] == [
        (
            "self_preference_without_own_family",
            "judge judge_c (family fam_z) scored no run of an agent of its own family: "
            "no self-preference coefficient",
        )
    ]
    assert mine[0].affects == ("self_preference",)


def test_every_judge_with_own_family_runs_gets_no_such_warning() -> None:
    rep = _report(synthetic_tables(n_tasks=12, n_agents=3, seed=2))
    assert not [w for w in rep.warnings if w.kind == "self_preference_without_own_family"]


def test_judge_agreement_names_the_judges_left_out_of_the_panel(flaky: st.Tables) -> None:
    [agree] = _report(flaky).judge_agreement
    assert agree.judges == ("judge_a", "judge_b", "judge_c")
    assert agree.left_out == ("judge_c",)
    [complete] = _report(synthetic_tables(n_tasks=12, n_agents=3, seed=2)).judge_agreement
    assert complete.left_out == ()
