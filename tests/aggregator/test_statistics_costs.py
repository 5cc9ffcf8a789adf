"""Cost and effort: per-run summaries, cost per passed task and judge costs, by hand."""

from __future__ import annotations

import math

import polars as pl
import pytest

from assay_report import statistics as st
from assay_testing.synthetic_tables import synthetic_tables


def test_cost_per_passed_task_by_hand() -> None:
    t = synthetic_tables(n_tasks=4, n_agents=1, n_epochs=2, seed=3, empty_artifact_rate=0.0)
    # Task 0 and 1 pass (every rating 9), tasks 2 and 3 fail (every rating 3).
    passing = pl.col("task_id").is_in(["task_0000", "task_0001"])
    ratings = t.ratings.with_columns(score=pl.when(passing).then(9).otherwise(3))
    runs = t.runs.with_columns(cost_usd=pl.lit(0.25), input_tokens=pl.lit(1000))
    rep = st.compute_statistics(
        st.make_tables(ratings, runs), st.AnalysisSettings(seed=0, n_resamples=20)
    )
    [cost] = rep.agent_costs
    assert cost.n_runs == 8 and cost.n_passed_tasks == 2
    assert cost.cost_usd == pytest.approx(2.0) and cost.cost_per_passed_task == pytest.approx(1.0)
    tokens = next(r for r in rep.run_costs if r.metric == "input_tokens")
    assert (tokens.mean, tokens.p50, tokens.p95) == (1000.0, 1000.0, 1000.0)
    assert {r.metric for r in rep.run_costs} == {
        "latency_s",
        "cost_usd",
        "steps",
        "input_tokens",
        "output_tokens",
        "cached_tokens",
    }


def test_no_passed_task_gives_nan_cost_per_pass() -> None:
    t = synthetic_tables(n_tasks=3, n_agents=1, seed=3)
    rep = st.compute_statistics(
        st.make_tables(t.ratings.with_columns(score=pl.lit(2, pl.Int64)), t.runs),
        st.AnalysisSettings(seed=0, n_resamples=20),
    )
    assert rep.agent_costs[0].n_passed_tasks == 0
    assert math.isnan(rep.agent_costs[0].cost_per_passed_task)


def test_judge_cost_rows_summarise_each_verdict() -> None:
    verdicts = pl.DataFrame(
        {
            "judge_id": ["b", "a", "a", "a"],
            "input_tokens": [10, 100, 200, 300],
            "output_tokens": [1, 10, 20, 30],
            "cached_tokens": [0, 50, 0, 0],
            "cost_usd": [0.1, 1.0, 2.0, 6.0],
        }
    )
    rows = {(r.judge_id, r.metric): r for r in st.judge_cost_rows(verdicts)}
    a = rows[("a", "cost_usd")]
    assert (a.n_verdicts, a.total, a.mean, a.p50) == (3, 9.0, 3.0, 2.0)
    assert a.p95 == pytest.approx(2.0 + 0.9 * 4.0)
    assert rows[("a", "cached_tokens")].total == 50 and rows[("b", "input_tokens")].total == 10
