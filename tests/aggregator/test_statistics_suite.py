"""The suite: determinism, grouping, filtering, validation, ranks, operations, exports."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import polars as pl
import pytest

from assay_report import statistics as st
from assay_report.statistics import _results
from assay_report.statistics._bootstrap import resample_counts
from assay_report.statistics._panel import prepare
from assay_testing.synthetic_tables import synthetic_tables
from tests.aggregator.stats import rows_of


@pytest.fixture(scope="module")
def tables() -> st.Tables:
    return synthetic_tables(
        n_tasks=40,
        n_agents=4,
        n_epochs=2,
        agent_skill=[-1.0, 0.0, 0.2, 1.5],
        infrastructure_failure_rate=0.05,
        seed=9,
    )


def test_exports() -> None:
    assert sorted(st.__all__) == sorted(set(st.__all__))
    for name in st.__all__:
        assert hasattr(st, name), name
    for name in _results.__all__:
        assert name in st.__all__


def test_same_seed_is_byte_identical_other_seed_is_not(tables: st.Tables) -> None:
    a = st.compute_statistics(tables, st.AnalysisSettings(seed=5, n_resamples=500))
    b = st.compute_statistics(tables, st.AnalysisSettings(seed=5, n_resamples=500))
    c = st.compute_statistics(tables, st.AnalysisSettings(seed=6, n_resamples=500))
    assert a.model_dump_json() == b.model_dump_json()
    assert a.model_dump_json() != c.model_dump_json()
    # Point estimates do not depend on the seed; intervals do.
    assert [r.estimate for r in a.agent_scores] == [r.estimate for r in c.agent_scores]
    assert [r.ci_low for r in a.agent_scores] != [r.ci_low for r in c.agent_scores]


def test_suite_matches_single_functions(tables: st.Tables) -> None:
    rep = st.compute_statistics(tables, st.AnalysisSettings(seed=3, n_resamples=300))
    kw = {"seed": 3, "n_resamples": 300}
    assert rep.agent_scores == rows_of(st.overall_score_rows, tables, **kw)
    assert rep.self_preference == rows_of(st.self_preference_rows, tables, **kw)
    assert rep.pairwise_differences == rows_of(st.pairwise_rows, tables, **kw)
    assert rep.tag_rates == rows_of(st.tag_rate_rows, tables, **kw)
    frames = rep.frames()
    assert set(frames) == {n for n in type(rep).model_fields if isinstance(getattr(rep, n), tuple)}
    assert len(frames) == 19
    assert frames["agent_scores"].height == 4
    assert frames["agent_scores"].columns[:2] == ["group", "agent_id"]
    assert frames["judge_agreement"]["judges"].dtype == pl.List(pl.String)


def test_group_by_equals_analysing_each_group(tables: st.Tables) -> None:
    grouped = rows_of(st.overall_score_rows, tables, seed=2, n_resamples=300, group_by="domain")
    groups = sorted({r.group for r in grouped if r.group is not None})
    assert groups == ["biology", "chemistry", "physics"]
    for g in groups:
        keep = pl.col("domain") == g
        sub = st.make_tables(
            tables.ratings.filter(keep),
            tables.runs.filter(keep),
            tables.tags.join(tables.runs.filter(keep).select("run_id"), on="run_id", how="semi"),
        )
        alone = rows_of(st.overall_score_rows, sub, seed=2, n_resamples=300)
        assert [r.model_copy(update={"group": g}) for r in alone] == [
            r for r in grouped if r.group == g
        ]
    diff = st.compute_statistics(
        tables, st.AnalysisSettings(seed=2, n_resamples=100, group_by="difficulty")
    )
    assert {r.group for r in diff.agent_scores} == {"", "easy", "hard", "medium"}


@pytest.mark.parametrize("group_by", [None, "domain"])
def test_a_context_weighs_every_statistic_in_one_pass(
    tables: st.Tables, group_by: st.TaskAttribute | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every bootstrapped statistic's columns are weighed ahead, in one pass per context
    (one wide product costs a fraction of the same columns in narrow ones): a statistic
    whose inputs the suite does not list would cost a pass of its own here. Each of them
    is in this report (the gap, tag rates and self-preference included), and the answers
    are those of weighing each statistic's columns on its own, bit for bit (the products
    are exact)."""
    from assay_report.statistics import _bootstrap

    passes: list[int] = []
    weigh = _bootstrap.weigh

    def spy(counts: np.ndarray, m: np.ndarray, row_sum: int | None = None) -> np.ndarray:
        passes.append(m.shape[1])
        return weigh(counts, m, row_sum)

    monkeypatch.setattr(_bootstrap, "weigh", spy)
    settings = st.AnalysisSettings(seed=4, n_resamples=400, group_by=group_by)
    rep = st.compute_statistics(tables, settings)
    groups = 1 if group_by is None else len({r.group for r in rep.agent_scores})
    assert len(passes) == groups, passes
    assert rep.communication_gap and rep.tag_rates and rep.self_preference
    monkeypatch.setattr(_bootstrap, "weigh", weigh)
    stats: tuple[tuple[str, Callable[[st.Context], list[Any]]], ...] = (
        ("agent_scores", st.overall_score_rows),
        ("dimension_scores", st.dimension_score_rows),
        ("communication_gap", st.communication_gap_rows),
        ("tag_rates", st.tag_rate_rows),
        ("self_preference", st.self_preference_rows),
    )
    for field, stat in stats:
        alone = rows_of(stat, tables, seed=4, n_resamples=400, group_by=group_by)
        got, want = getattr(rep, field), alone
        assert len(got) == len(want) > 0, field
        assert [g.model_dump_json() for g in got] == [w.model_dump_json() for w in want], field


def test_filter_campaign(tables: st.Tables) -> None:
    other = st.Tables(
        *(
            df.with_columns(
                campaign_id=pl.lit("campaign-2"), run_id=pl.lit("x-") + pl.col("run_id")
            )
            for df in tables
        )
    )
    both = st.make_tables(*(pl.concat([a, b]) for a, b in zip(tables, other, strict=True)))
    only = st.filter_campaign(both, "campaign-1")
    assert rows_of(st.overall_score_rows, only, seed=1, n_resamples=100) == rows_of(
        st.overall_score_rows, tables, seed=1, n_resamples=100
    )
    assert st.filter_campaign(both, ["campaign-1", "campaign-2"]).runs.height == both.runs.height


@pytest.mark.parametrize(
    ("table", "column"), [("ratings", "judge_family"), ("runs", "latency_s"), ("tags", "tag")]
)
def test_missing_column_is_named(tables: st.Tables, table: str, column: str) -> None:
    broken = tables._replace(**{table: getattr(tables, table).drop(column)})
    with pytest.raises(st.StatisticsInputError, match=f"{table}.*{column}"):
        st.make_tables(*broken)


def test_validation_errors(tables: st.Tables) -> None:
    with pytest.raises(st.StatisticsInputError, match=r"score.*0-10"):
        st.make_tables(tables.ratings.with_columns(score=pl.col("score") + 11), tables.runs)
    with pytest.raises(st.StatisticsInputError, match="'score' has dtype"):
        st.make_tables(tables.ratings.with_columns(pl.col("score").cast(pl.String)), tables.runs)
    with pytest.raises(st.StatisticsInputError, match="not in table 'runs'"):
        st.make_tables(tables.ratings, tables.runs.slice(1))
    with pytest.raises(st.StatisticsInputError, match="group_by"):
        rows_of(st.overall_score_rows, tables, seed=0, group_by="colour")
    with pytest.raises(st.StatisticsInputError, match="no dimension 'tone'"):
        rows_of(
            partial(st.communication_gap_rows, communication="tone"), tables, seed=0, n_resamples=10
        )


def test_tables_are_checked_once_and_what_is_made_of_them_again(
    tables: st.Tables, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make_tables`'s own result is not checked again by the statistics (its repeats
    check took 0.05 s of every 10x report, twice); tables put together by hand, or
    changed from checked ones, are, and a rating given twice is refused there."""
    from assay_report.statistics import _tables

    checks: list[str] = []
    validate = _tables.validate_table

    def spy(df: pl.DataFrame, name: Any) -> pl.DataFrame:
        checks.append(name)
        return validate(df, name)

    monkeypatch.setattr(_tables, "validate_table", spy)
    made = st.make_tables(*tables)
    assert checks == ["ratings", "runs", "tags"]
    settings = st.AnalysisSettings(seed=1, n_resamples=20)
    st.compute_statistics(made, settings)
    assert checks == ["ratings", "runs", "tags"]
    st.compute_statistics(st.Tables(*made), settings)
    assert len(checks) == 6
    twice = made._replace(ratings=pl.concat([made.ratings, made.ratings.head(1)]))
    assert type(twice) is st.Tables
    with pytest.raises(st.StatisticsInputError, match="rated more than once"):
        st.compute_statistics(twice, settings)


def test_ranks_and_pairwise(tables: st.Tables) -> None:
    seed, b = 4, 2000
    ranks = {r.agent_id: r for r in rows_of(st.rank_rows, tables, seed=seed, n_resamples=b)}
    scores = {
        r.agent_id: r for r in rows_of(st.overall_score_rows, tables, seed=seed, n_resamples=b)
    }
    assert ranks["agent_3"].rank == 1.0 and ranks["agent_0"].rank == 4.0
    assert ranks["agent_3"].p_rank_1 > 0.95
    assert sum(r.p_rank_1 for r in ranks.values()) == pytest.approx(1.0)
    assert sum(r.mean_rank for r in ranks.values()) == pytest.approx(10.0)
    # Reference: literal per-draw ranking from the same resample counts.
    panel = prepare(tables)
    counts = resample_counts(seed, b, len(panel.task_ids))
    rs = panel.run_score
    t_n, a_n = len(panel.task_ids), len(panel.agent_ids)
    s = np.zeros((t_n, a_n))
    n = np.zeros((t_n, a_n))
    np.add.at(s, (panel.run_task, panel.run_agent), rs)
    np.add.at(n, (panel.run_task, panel.run_agent), 1.0)
    m = np.divide(s, n, out=np.zeros_like(s), where=n > 0)
    draws = (counts @ m) / (counts @ (n > 0))
    order = np.argsort(-draws, axis=1)
    assert ranks["agent_1"].p_rank_1 == pytest.approx((order[:, 0] == 1).mean())
    pairs = {
        (p.agent_a, p.agent_b): p
        for p in rows_of(st.pairwise_rows, tables, seed=seed, n_resamples=b)
    }
    assert len(pairs) == 6
    p03 = pairs[("agent_0", "agent_3")]
    assert p03.difference == pytest.approx(scores["agent_0"].estimate - scores["agent_3"].estimate)
    d = draws[:, 0] - draws[:, 3]
    assert p03.ci_low == pytest.approx(np.quantile(d, 0.025))
    assert p03.ci_high < 0 and p03.p_a_better < 0.01
    # Paired SE is smaller than the unpaired combination (shared task difficulty).
    assert p03.se < np.hypot(scores["agent_0"].se, scores["agent_3"].se)


def _panel_by_hand(tables: st.Tables, anchor: int) -> dict[str, Any]:
    """The panel's per-(run, judge) and per-(run, judge, dimension) figures from the
    ratings rows, in plain Python: ratings of infrastructure failures dropped."""
    failed = set(tables.runs.filter(pl.col("infrastructure_failure"))["run_id"].to_list())
    cells: dict[tuple[str, str], list[tuple[int, int]]] = {}
    dims: dict[tuple[str, str, str], list[int]] = {}
    for r in tables.ratings.iter_rows(named=True):
        if r["run_id"] in failed:
            continue
        cells.setdefault((r["run_id"], r["judge_id"]), []).append((r["sample"], r["score"]))
        dims.setdefault((r["run_id"], r["judge_id"], r["dimension"]), []).append(r["score"])
    return {
        "n_ratings": {k: len(v) for k, v in cells.items()},
        "n_below": {k: sum(score < anchor for _, score in v) for k, v in cells.items()},
        "n_verdicts": {k: len({sample for sample, _ in v}) for k, v in cells.items()},
        "judge_score": {k: sum(score for _, score in v) / len(v) for k, v in cells.items()},
        "judge_dim": {k: sum(v) / len(v) for k, v in dims.items()},
    }


@pytest.mark.parametrize("sample_step", [1, 100_000])
def test_the_panel_counts_the_ratings_as_by_hand(tables: st.Tables, sample_step: int) -> None:
    """Every (run, judge) cell of the panel, and every (run, judge, dimension) one, is what
    the ratings say counted one by one; absent cells are 0 or NaN. Some judges leave some
    dimensions unrated, verdicts come in several samples, and (second case) sample
    numbers far apart, which the panel counts another way than small ones; an
    infrastructure failure's ratings count nowhere."""
    rng = np.random.default_rng(3)
    ratings = tables.ratings.with_columns(
        sample=(pl.col("sample") + pl.Series(rng.integers(0, 3, tables.ratings.height)))
        * sample_step
    ).filter(pl.Series(rng.random(tables.ratings.height) > 0.1))
    failed = tables.runs.filter(pl.col("infrastructure_failure")).row(0, named=True)
    of_failed = ratings.head(16).with_columns(
        run_id=pl.lit(failed["run_id"]),
        task_id=pl.lit(failed["task_id"]),
        agent_id=pl.lit(failed["agent_id"]),
    )
    ratings = pl.concat([ratings, of_failed])
    ratings = ratings.unique(["run_id", "judge_id", "sample", "dimension"], maintain_order=True)
    sub = st.make_tables(ratings, tables.runs, tables.tags)
    panel = prepare(sub, anchor=7)
    want = _panel_by_hand(sub, anchor=7)
    assert want["n_verdicts"] and max(want["n_verdicts"].values()) > 1
    run = {r: i for i, r in enumerate(panel.run_ids)}
    judge = {j: i for i, j in enumerate(panel.judge_ids)}
    dim = {d: i for i, d in enumerate(panel.dimensions)}
    assert set(run) == {r for r, _ in want["n_ratings"]}
    for name in ("n_ratings", "n_below", "n_verdicts", "judge_score"):
        got = getattr(panel, name)
        expect = np.full(got.shape, np.nan if name == "judge_score" else 0.0)
        for (r, j), v in want[name].items():
            expect[run[r], judge[j]] = v
        assert np.array_equal(got, expect, equal_nan=True), name
    expect = np.full(panel.judge_dim.shape, np.nan)
    for (r, j, d), v in want["judge_dim"].items():
        expect[run[r], judge[j], dim[d]] = v
    assert np.array_equal(panel.judge_dim, expect, equal_nan=True)


def test_epoch_spread_and_costs(tables: st.Tables) -> None:
    panel = prepare(tables)
    rs = panel.run_score
    spread = {r.agent_id: r for r in rows_of(st.epoch_spread_rows, tables, seed=0)}
    sds = []
    for t in range(len(panel.task_ids)):
        v = rs[(panel.run_task == t) & (panel.run_agent == 2)]
        if v.size >= 2:
            sds.append(np.std(v, ddof=1))
    assert spread["agent_2"].n_cells == len(sds)
    assert spread["agent_2"].mean_within_sd == pytest.approx(np.mean(sds))
    assert spread["agent_2"].pooled_within_sd == pytest.approx(np.sqrt(np.mean(np.square(sds))))
    costs = {(c.agent_id, c.metric): c for c in rows_of(st.cost_rows, tables, seed=0)}
    ok = tables.runs.filter(~pl.col("infrastructure_failure") & (pl.col("agent_id") == "agent_1"))
    lat = ok["latency_s"].to_numpy()
    c = costs[("agent_1", "latency_s")]
    assert (c.n_runs, c.mean, c.p50, c.p95) == pytest.approx(
        (lat.size, lat.mean(), np.median(lat), np.quantile(lat, 0.95))
    )
    single = rows_of(st.epoch_spread_rows, synthetic_tables(n_tasks=5, n_agents=2, seed=1), seed=0)
    assert all(r.n_cells == 0 and np.isnan(r.mean_within_sd) for r in single)


def test_to_frame_and_definitions() -> None:
    empty = st.to_frame([], st.SelfPreference)
    assert empty.height == 0 and "coefficient" in empty.columns
    with pytest.raises(ValueError, match="row_type"):
        st.to_frame([])
    for key in ("agent_score", "self_preference", "k_eff", "icc", "krippendorff_alpha"):
        assert key in st.DEFINITIONS
    assert st.definitions_markdown().startswith("- **")


def test_degenerate_inputs_give_nan_not_errors() -> None:
    t = synthetic_tables(n_tasks=3, n_agents=2, seed=1)
    one_judge = st.make_tables(t.ratings.filter(pl.col("judge_id") == "judge_a"), t.runs)
    rep = st.compute_statistics(one_judge, st.AnalysisSettings(seed=0, n_resamples=50))
    assert np.isnan(rep.self_preference[0].coefficient)
    assert np.isnan(rep.judge_agreement[0].krippendorff_alpha)
    agent_1_failed = t.runs.with_columns(infrastructure_failure=pl.col("agent_id") == "agent_1")
    rep = st.compute_statistics(
        st.make_tables(t.ratings, agent_1_failed), st.AnalysisSettings(seed=0, n_resamples=50)
    )
    assert np.isnan(rep.agent_scores[1].estimate) and np.isnan(rep.agent_scores[1].se)
    assert rep.agent_ranks[0].p_rank_1 == 1.0 and np.isnan(rep.agent_ranks[1].rank)
    assert rep.run_accounting[1].n_infrastructure_failures == 3
    nothing = st.make_tables(t.ratings.head(0), t.runs)
    rep = st.compute_statistics(nothing, st.AnalysisSettings(seed=0, n_resamples=50))
    assert len(rep.unpassed_tasks) == 3 and rep.run_accounting[0].n_unscored == 3
