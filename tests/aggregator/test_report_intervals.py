"""Every interval in the report claims no more than its counts carry (issue 48): the Judges
table's rates against statsmodels, and no zero-width interval anywhere in the JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

from assay_aggregator import fold
from assay_report import Projections, build_report, report_json
from assay_schemas import ErrorInfo, Event, JudgmentFailed, JudgmentRecorded
from assay_testing.events import judgment_failed
from assay_testing.synthetic_log import synthetic_events

from .conftest import SPEC

RESAMPLES = 300
# agent_0 rates 0 and agent_2 rates 10 on every task (the scale clips them): their
# scores, dimension scores and gaps have no spread across tasks.
FLAT = replace(SPEC, agent_skill=[-30.0, 0.0, 30.0])


def _failed(v: JudgmentRecorded) -> JudgmentFailed:
    return judgment_failed(
        v,
        v.judge_id,
        v.sample,
        event_id=f"gave-up-{v.event_id}",
        error="ProviderError: 503",
        error_info=ErrorInfo(error_class="ProviderError", message="503"),
        attempts=3,
        infrastructure=True,
    )


def _judge_trouble(events: Iterator[Event]) -> list[Event]:
    """judge_a gives up on 3 verdicts; judge_b's first 5 verdicts needed a repair."""
    out: list[Event] = []
    gave_up = repaired = 0
    for e in events:
        if isinstance(e, JudgmentRecorded) and e.judge_id == "judge_a" and gave_up < 3:
            out.append(_failed(e))
            gave_up += 1
            continue
        if isinstance(e, JudgmentRecorded) and e.judge_id == "judge_b" and repaired < 5:
            e = e.model_copy(update={"attempts": 2})
            repaired += 1
        out.append(e)
    return out


def _statsmodels(k: int, n: int) -> tuple[float, float]:
    """Wilson's interval, Clopper–Pearson's (beta) at 0 or n."""
    method = "beta" if k in (0, n) else "wilson"
    low, high = proportion_confint(k, n, alpha=0.05, method=method)
    return float(low), float(high)


def test_judge_repair_and_failure_rates_equal_statsmodels() -> None:
    events = _judge_trouble(synthetic_events(SPEC))
    report = build_report(Projections(fold(enumerate(events, 1))), n_resamples=RESAMPLES)
    judges = {j.judge_id: j for j in report.judges}
    a, b = judges["judge_a"], judges["judge_b"]
    assert (a.n_failures, a.n_repaired, b.n_failures, b.n_repaired) == (3, 0, 0, 5)
    for j in (a, b):
        repair = _statsmodels(j.n_repaired, j.n_verdicts)
        failure = _statsmodels(j.n_failures, j.n_verdicts + j.n_failures)
        assert (j.repair_ci_low, j.repair_ci_high) == pytest.approx(repair, abs=1e-12)
        assert (j.failure_ci_low, j.failure_ci_high) == pytest.approx(failure, abs=1e-12)
        assert j.repair_ci_high > j.repair_ci_low and j.failure_ci_high > j.failure_ci_low


def _pairs(doc: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every (…ci_low, …ci_high) pair in the JSON, with where it is. Rank intervals are
    left out: a rank is an integer, and [1, 1] says the agent ranked first in every
    resample (the pairwise differences carry how far apart the scores are)."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key.endswith("ci_low") and not key.startswith("rank_"):
                yield f"{path}.{key}", value, doc[key.removesuffix("low") + "high"]
            yield from _pairs(value, f"{path}.{key}")
    elif isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from _pairs(item, f"{path}[{i}]")


def test_no_interval_in_the_report_has_zero_width_unless_not_estimable() -> None:
    events = _judge_trouble(synthetic_events(FLAT))
    text = report_json(build_report(Projections(fold(enumerate(events, 1))), n_resamples=RESAMPLES))
    doc = json.loads(text)
    scores = {r["agent_id"]: r for r in doc["statistics"]["agent_scores"]}
    assert scores["agent_0"]["no_spread"] and scores["agent_2"]["no_spread"], "planted"
    assert (scores["agent_0"]["estimate"], scores["agent_2"]["estimate"]) == (0.0, 10.0)
    pairs = list(_pairs(doc))
    tables = {path.split("[")[0] for path, _, _ in pairs}
    assert {
        ".statistics.agent_scores",
        ".statistics.dimension_scores",
        ".statistics.judge_leaderboards",
        ".statistics.communication_gap",
        ".statistics.pairwise_differences",
        ".statistics.pass_rates",
        ".statistics.self_preference",
        ".judges",
        ".rule_tags",
        ".reference_checks",
    } <= tables
    # Not estimable is written as null bounds (NaN in the rows); anything else has width.
    flat = [p for p in pairs if not (p[1] is None and p[2] is None) and not p[2] > p[1]]
    assert flat == []
    assert not any(isinstance(v, float) and math.isnan(v) for _, lo, hi in pairs for v in (lo, hi))
    # The report stays a pure function of the log.
    again = build_report(
        Projections(fold(enumerate(_judge_trouble(synthetic_events(FLAT)), 1))),
        n_resamples=RESAMPLES,
    )
    assert report_json(again) == text
