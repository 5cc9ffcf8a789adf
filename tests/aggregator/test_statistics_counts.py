"""Plain counts: run states, infrastructure failures, the rule judge's checks and tags."""

from __future__ import annotations

import math

import polars as pl
import pytest
from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

from assay_report import statistics as st


def _tables() -> st.CountTables:
    runs = pl.DataFrame(
        {
            "run_id": ["r1", "r2", "r3", "r4"],
            "task_id": ["t1", "t2", "t1", "t1"],
            "agent_id": ["A", "A", "B", "B"],
            "domain": ["bio", "chem", "bio", "bio"],
            "state": ["judged", "judged", "failed", "judged"],
            "infrastructure_failure": [False, False, True, False],
            "failure_stage": ["", "", "sandbox", ""],
        }
    )
    checks = pl.DataFrame(
        {
            "run_id": ["r1", "r1", "r2", "r3", "r4", "r1", "r4"],
            "agent_id": ["A", "A", "A", "B", "B", "A", "B"],
            "name": [
                "mean",
                "n_rows",
                "mean",
                "mean",
                "mean",
                "artifacts_present",
                "scripts_executed",
            ],
            "passed": [True, False, True, True, False, True, False],
            "weight": [3.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0],
            "detail": [
                "ok",
                "found 9, expected 10",
                "ok",
                "ok",
                "found 2.5, expected 3.1",
                "1 file(s)",
                "never run: a.py",
            ],
        }
    )
    verdicts = pl.DataFrame({"run_id": ["r1", "r2", "r3", "r4"]})
    tags = pl.DataFrame({"run_id": ["r1", "r1", "r3"], "tag": ["overclaiming"] * 3})
    return st.CountTables(runs, checks, verdicts, tags)


def test_run_states_and_infrastructure_failures() -> None:
    t = _tables()
    assert [(r.state, r.n_runs) for r in st.run_state_counts(t)] == [("failed", 1), ("judged", 3)]
    infra = st.infrastructure_failure_counts(t)
    assert [(r.agent_id, r.stage, r.n_runs) for r in infra] == [("B", "sandbox", 1)]


def test_reference_checks_leave_out_infrastructure_failures() -> None:
    a, b = st.reference_check_rates(_tables())
    assert (a.agent_id, a.n_runs, a.n_checks, a.n_passed) == ("A", 2, 3, 2)
    assert a.weighted_pass_rate == 4 / 5
    assert (b.agent_id, b.n_checks, b.pass_rate) == ("B", 1, 0.0)
    assert math.isnan(b.weighted_pass_rate)  # no weight to share
    grouped = st.reference_check_rates(_tables(), group_by="domain")
    assert [(r.group, r.agent_id, r.n_checks) for r in grouped] == [
        ("bio", "A", 2),
        ("bio", "B", 1),
        ("chem", "A", 1),
    ]


def test_rule_tags_count_untagged_agents_too() -> None:
    rates = st.rule_tag_rates(_tables())
    assert [(r.agent_id, r.tag, r.n_tagged, r.n_runs, r.rate) for r in rates] == [
        ("A", "overclaiming", 1, 2, 0.5),
        ("B", "overclaiming", 0, 1, 0.0),
    ]


def test_rule_judge_checks_are_counted_apart_from_the_tasks() -> None:
    ref = {r.agent_id: (r.n_passed, r.n_checks) for r in st.reference_check_rates(_tables())}
    own = {
        r.agent_id: (r.n_passed, r.n_checks)
        for r in st.reference_check_rates(_tables(), kind="rule")
    }
    assert ref == {"A": (2, 3), "B": (0, 1)} and own == {"A": (1, 1), "B": (0, 1)}
    assert {"artifacts_present", "scripts_executed"} <= st.RULE_CHECKS


def test_reference_check_matrix_names_each_failed_check_and_value() -> None:
    cells = {(c.task_id, c.agent_id): c for c in st.reference_check_matrix(_tables())}
    # r3 (B on t1) is an infrastructure failure: only r4 counts for B.
    assert sorted(cells) == [("t1", "A"), ("t1", "B"), ("t2", "A")]
    a1 = cells[("t1", "A")]
    assert (a1.n_runs, a1.n_passed, a1.n_checks, a1.pass_rate) == (1, 1, 2, 0.5)
    assert a1.failed == ("r1: n_rows — found 9, expected 10",)
    assert cells[("t1", "B")].failed == ("r4: mean — found 2.5, expected 3.1",)
    assert cells[("t2", "A")].failed == () and cells[("t2", "A")].pass_rate == 1.0


def test_rule_tag_and_check_rates_carry_binomial_intervals() -> None:
    """Against statsmodels: Wilson's interval, Clopper–Pearson's at 0 or n; A's three checks
    over two runs vary less between runs than independent checks would (design effect
    below 1, kept at 1), so they count as three."""
    tags = {r.agent_id: r for r in st.rule_tag_rates(_tables())}
    assert (tags["A"].ci_low, tags["A"].ci_high) == pytest.approx(
        proportion_confint(1, 2, method="wilson"), abs=1e-12
    )
    assert (tags["B"].ci_low, tags["B"].ci_high) == pytest.approx(
        proportion_confint(0, 1, method="beta"), abs=1e-12
    )
    a, b = st.reference_check_rates(_tables())
    assert (a.ci_low, a.ci_high) == pytest.approx(
        proportion_confint(2, 3, method="wilson"), abs=1e-12
    )
    assert (b.ci_low, b.ci_high) == pytest.approx(
        proportion_confint(0, 1, method="beta"), abs=1e-12
    )


def test_checks_clustered_in_runs_count_as_fewer() -> None:
    """Two runs of five checks, one all passed and one all failed: the ten checks carry
    what two runs do (design effect 5), so the interval is Wilson's at 1 of 2."""
    t = _tables()
    runs = t.runs.filter(pl.col("run_id").is_in(["r1", "r2"]))
    checks = pl.DataFrame(
        {
            "run_id": ["r1"] * 5 + ["r2"] * 5,
            "agent_id": ["A"] * 10,
            "name": [f"c{i}" for i in range(5)] * 2,
            "passed": [True] * 5 + [False] * 5,
            "weight": [1.0] * 10,
            "detail": ["ok"] * 10,
        }
    )
    (a,) = st.reference_check_rates(st.CountTables(runs, checks, t.verdicts, t.tags))
    assert (a.n_checks, a.pass_rate) == (10, 0.5)
    assert (a.ci_low, a.ci_high) == pytest.approx(
        proportion_confint(1, 2, method="wilson"), abs=1e-12
    )
