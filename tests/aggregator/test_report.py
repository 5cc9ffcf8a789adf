"""The report: equals the statistics on the same tables, canonical, planted effects, HTML."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from assay_aggregator import fold
from assay_report import Projections, build_report, canonical_json, report_json, report_seed
from assay_report.html import plots, render_html
from assay_report.pages import render_chart
from assay_report.statistics import DEFINITIONS, AnalysisSettings, compute_statistics
from assay_testing.synthetic_log import synthetic_events

from .conftest import SPEC

RESAMPLES = 300


@pytest.fixture(scope="module")
def projections() -> Projections:
    return Projections(fold(enumerate(synthetic_events(SPEC), 1)))


def test_report_equals_the_statistics_on_the_same_tables(projections: Projections) -> None:
    report = build_report(projections, campaign="camp", n_resamples=RESAMPLES)
    direct = compute_statistics(
        projections.statistics_tables(["camp"]),
        AnalysisSettings(seed=report_seed(["camp"]), n_resamples=RESAMPLES),
    )
    assert canonical_json(report.statistics) == canonical_json(direct)
    assert report.statistics.seed == report_seed(["camp"]) != report_seed(["other"])


def test_two_folds_give_byte_identical_reports(projections: Projections) -> None:
    again = Projections(fold(enumerate(synthetic_events(SPEC), 1)))
    a = report_json(build_report(projections, n_resamples=RESAMPLES, group_by="domain"))
    b = report_json(build_report(again, n_resamples=RESAMPLES, group_by="domain"))
    assert a == b
    doc = json.loads(a)
    assert list(doc) == sorted(doc)
    assert {r["group"] for r in doc["statistics"]["agent_scores"]} == {
        "biology",
        "chemistry",
        "physics",
    }


def test_canonical_json_is_fixed() -> None:
    assert canonical_json({"b": 1.0, "a": [float("nan"), 0.1 + 0.2, -0.0, 3, True, None]}) == (
        b'{"a": [null, 0.3, 0.0, 3, true, null], "b": 1.0}\n'
    )


def test_planted_effects_and_added_sections(projections: Projections) -> None:
    report = build_report(projections, n_resamples=RESAMPLES)
    s = report.statistics
    assert report.scripted
    ranks = {r.agent_id: r.rank for r in s.agent_ranks}
    assert ranks == {"agent_2": 1.0, "agent_1": 2.0, "agent_0": 3.0}
    gap = {r.agent_id: r.gap for r in s.communication_gap}
    assert gap["agent_0"] > 1.0 > abs(gap["agent_2"])
    over = {r.agent_id: r.rate for r in s.tag_rates if r.tag == "overclaiming"}
    assert s.tag_rates[0].tag == "overclaiming" and over["agent_0"] > over["agent_2"]
    # The rule judge never enters score statistics, but its tags and checks are reported.
    assert {r.judge_id for r in s.below_anchor_shares} == {None, "judge_a", "judge_b"}
    assert {j.judge_id: j.kind for j in report.judges}["rules"] == "rules"
    assert {r.tag for r in report.rule_tags} >= {"no_artifacts"}
    checks = projections.table("checks").join(
        projections.table("runs").filter(~pl.col("infrastructure_failure")).select("run_id"),
        on="run_id",
    )
    for row in report.reference_checks:
        mine = checks.filter(pl.col("agent_id") == row.agent_id)
        assert row.n_checks == mine.height and row.n_passed == mine["passed"].sum()
    infra = projections.table("runs")["infrastructure_failure"].sum()
    assert sum(r.n_runs for r in report.infrastructure_failures) == infra > 0


def test_html_is_self_contained_with_plots_and_definitions(projections: Projections) -> None:
    html = render_html(build_report(projections, n_resamples=RESAMPLES))
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "<script" not in html and "<link" not in html
    assert html.count("<svg") == 7
    for title in (
        "Leaderboard",
        "Per-dimension",
        "Accuracy vs communication",
        "Failure tags",
        "Judge agreement",
        "Rank distribution",
        "Reference checks passed (task × agent)",
        "Warnings",
        "Cost per passed task",
        "Judge cost and tokens",
    ):
        assert title in html, title
    assert "SCRIPTED CAMPAIGN" in html
    for key in DEFINITIONS:
        assert f"<dt>{key}</dt>" in html


def test_html_is_byte_identical_and_escapes_names(projections: Projections) -> None:
    report = build_report(projections, n_resamples=RESAMPLES, group_by="domain")
    assert render_html(report) == render_html(report)
    hostile = "<script>alert(1)</script>"
    renamed = report.model_copy(
        update={
            "statistics": report.statistics.model_copy(
                update={
                    "agent_scores": [
                        r.model_copy(update={"agent_id": hostile})
                        for r in report.statistics.agent_scores
                    ]
                }
            )
        }
    )
    html = render_html(renamed)
    assert hostile not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_one_chart_layer_for_every_page(projections: Projections) -> None:
    # What a web view embeds is the very element the report holds.
    report = build_report(projections, n_resamples=RESAMPLES)
    first = plots(report)[0].charts[0]
    assert render_chart(first) in render_html(report)
    assert render_chart(first).startswith("<svg") and render_chart(first).endswith("</svg>")
