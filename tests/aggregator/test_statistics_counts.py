"""Plain counts: run states, infrastructure failures, the rule judge's checks and tags."""

from __future__ import annotations

import math

import polars as pl

from assay_aggregator import statistics as st


def _tables() -> st.CountTables:
    runs = pl.DataFrame(
        {
            "run_id": ["r1", "r2", "r3", "r4"],
            "agent_id": ["A", "A", "B", "B"],
            "domain": ["bio", "chem", "bio", "bio"],
            "state": ["judged", "judged", "failed", "judged"],
            "infrastructure_failure": [False, False, True, False],
            "failure_stage": ["", "", "sandbox", ""],
        }
    )
    checks = pl.DataFrame(
        {
            "run_id": ["r1", "r1", "r2", "r3", "r4"],
            "agent_id": ["A", "A", "A", "B", "B"],
            "passed": [True, False, True, True, False],
            "weight": [3.0, 1.0, 1.0, 1.0, 0.0],
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
