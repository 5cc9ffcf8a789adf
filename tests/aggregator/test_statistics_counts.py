"""Plain counts: run states, infrastructure failures, the rule judge's checks and tags."""

from __future__ import annotations

import math

import polars as pl

from assay_aggregator import statistics as st


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
            "name": ["mean", "n_rows", "mean", "mean", "mean", "artifacts_present",
                     "scripts_executed"],
            "passed": [True, False, True, True, False, True, False],
            "weight": [3.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0],
            "detail": ["ok", "found 9, expected 10", "ok", "ok", "found 2.5, expected 3.1",
                       "1 file(s)", "never run: a.py"],
        }
    )  # fmt: skip
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
    own = {r.agent_id: (r.n_passed, r.n_checks) for r in st.reference_check_rates(_tables(), kind="rule")}  # fmt: skip
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
