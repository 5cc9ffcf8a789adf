"""Warnings from planted data: each degenerate case is named, with the figures it affects."""

from __future__ import annotations

import polars as pl
import pytest

from assay_report import statistics as st
from assay_testing.synthetic_tables import synthetic_tables


def _warnings(tables: st.Tables, **kw: object) -> dict[tuple[str, str], st.StatisticsWarning]:
    rep = st.compute_statistics(tables, st.AnalysisSettings(seed=1, n_resamples=100), **kw)  # type: ignore[arg-type]
    return {(w.kind, w.subject): w for w in rep.warnings}


def test_healthy_campaign_has_no_warning() -> None:
    # base 7.5: every agent passes some runs and fails others (no rate at 0 or 1).
    t = synthetic_tables(n_tasks=30, n_agents=3, seed=2, base=7.5)
    assert _warnings(t) == {}


def test_a_pass_rate_at_zero_warns_and_names_it() -> None:
    t = synthetic_tables(n_tasks=30, n_agents=3, seed=2)
    rep = st.compute_statistics(t, st.AnalysisSettings(seed=1, n_resamples=100))
    zero = [r for r in rep.pass_rates if r.pass_rate == 0.0]
    w = _warnings(t)[("boundary_interval", "pass_rates")]
    assert zero and all(r.ci_high > 0 for r in zero)
    assert w.message.startswith(
        f"{len(zero)} of 3 rates in pass_rates are at 0 or 1 ({zero[0].agent_id} 0% of {zero[0].n_runs}"
    )
    assert w.affects == ("pass_rates",)


def test_one_task_warns_of_zero_width_intervals_and_certain_ranks() -> None:
    t = synthetic_tables(n_tasks=1, n_agents=3, seed=2)
    w = _warnings(t)
    few = w[("few_tasks", "")]
    assert "only 1 scored task" in few.message and "zero width" in few.message
    assert {"agent_scores", "agent_ranks", "self_preference"} <= set(few.affects)
    assert w[("zero_width_interval", "agent_scores")].affects == ("agent_scores",)


def test_constant_judge_is_named_as_biasing_self_preference() -> None:
    t = synthetic_tables(n_tasks=30, n_agents=3, seed=2)
    constant = t.ratings.with_columns(
        score=pl.when(pl.col("judge_id") == "judge_b").then(7).otherwise(pl.col("score"))
    )
    w = _warnings(st.make_tables(constant, t.runs, t.tags))
    judge = w[("constant_judge", "judge_b")]
    assert "SD 0.00" in judge.message
    assert "self_preference" in judge.affects and "judge_agreement" in judge.affects
    assert [k for k in w if k[0] == "constant_judge"] == [("constant_judge", "judge_b")]


def test_scores_clipped_at_ten_are_flagged_per_judge() -> None:
    t = synthetic_tables(n_tasks=30, n_agents=3, seed=2, judge_leniency={"judge_a": 5.0})
    w = _warnings(t)
    clipped = w[("scores_at_scale_end", "judge_a")]
    assert "at 10" in clipped.message and "self_preference" in clipped.affects
    assert ("scores_at_scale_end", "judge_b") not in w


def test_declared_agent_and_judge_without_runs_and_infrastructure_failures() -> None:
    t = synthetic_tables(n_tasks=30, n_agents=3, seed=2, infrastructure_failure_rate=0.1)
    w = _warnings(
        t,
        declared_agents=("agent_0", "agent_1", "agent_2", "agent_9"),
        declared_judges=("judge_a", "judge_z"),
        tasks_without_checks=("task_0001",),
    )
    assert "agent_scores" in w[("agent_without_scored_runs", "agent_9")].affects
    assert ("agent_without_scored_runs", "agent_0") not in w
    assert "judge_agreement" in w[("judge_without_scored_runs", "judge_z")].affects
    infra = w[("infrastructure_failures", "agent_0")]
    n = t.runs.filter(pl.col("infrastructure_failure") & (pl.col("agent_id") == "agent_0")).height
    assert infra.message.startswith(f"{n} of 30 runs")
    assert "task_0001" in w[("tasks_without_reference_checks", "")].message


def test_single_judge_agreement_is_undefined() -> None:
    t = synthetic_tables(n_tasks=30, n_agents=3, seed=2)
    one = st.make_tables(t.ratings.filter(pl.col("judge_id") == "judge_a"), t.runs)
    assert ("agreement_undefined", "") in _warnings(one)


@pytest.mark.parametrize("group_by", ["domain"])
def test_warnings_per_group(group_by: str) -> None:
    t = synthetic_tables(n_tasks=12, n_agents=2, seed=2)
    rep = st.compute_statistics(t, st.AnalysisSettings(seed=1, n_resamples=100, group_by="domain"))
    few = [w for w in rep.warnings if w.kind == "few_tasks"]
    assert sorted(w.group or "" for w in few) == ["biology", "chemistry", "physics"]
