"""Attack (issue #24, round two): an unpriced model cost $0 in the report without a word.

A planted log where every model is unknown to the price table and logged at $0: the
report names each model that used tokens. A campaign's pinned price, a cost the service
did charge (its own configured table) and a scripted campaign (stand-ins cost nothing)
silence it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import polars as pl
import pytest

from assay_aggregator import fold
from assay_report import Projections, build_report
from assay_report.report import Report
from assay_report.statistics import USED_MODELS_SCHEMA, StatisticsInputError, unpriced_models
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    CampaignStarted,
    Event,
    JudgmentRecorded,
    Price,
    Usage,
)
from assay_testing.synthetic_log import LogSpec, synthetic_events

SPEC = LogSpec(campaign_id="priced", n_tasks=3, n_agents=2, rules=False, seed=1)


def _free(prices: dict[str, Price] | None = None) -> Callable[[Event], Event]:
    """Log every agent step at $0 and give judge_a's verdicts tokens at $0."""

    def edit(e: Event) -> Event:
        if isinstance(e, CampaignStarted) and prices:
            return e.model_copy(
                update={"campaign": e.campaign.model_copy(update={"prices": prices})}
            )
        if isinstance(e, AgentStepLogged | AgentFinished):
            return e.model_copy(update={"cost_usd": 0.0})
        if isinstance(e, JudgmentRecorded) and e.judge_id == "judge_a":
            return e.model_copy(update={"usage": Usage(input_tokens=900, output_tokens=80)})
        return e

    return edit


def _report(spec: LogSpec, edit: Callable[[Event], Event]) -> Report:
    events: Iterator[Event] = (edit(e) for e in synthetic_events(spec))
    return build_report(Projections(fold(enumerate(events, 1))), n_resamples=50)


def _priced(report: Report) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {
        w.subject: (w.message, w.affects)
        for w in report.statistics.warnings
        if w.kind == "model_without_price"
    }


def test_each_unpriced_model_logged_at_zero_is_named() -> None:
    found = _priced(_report(SPEC, _free()))
    assert sorted(found) == ["model-agent_0", "model-agent_1", "model-judge_a"]
    assert found["model-agent_0"] == (
        "cost of model model-agent_0 is unknown (no price in the default table or the "
        "campaign's prices); its cost figures count it as 0",
        ("run_costs", "agent_costs"),
    )
    assert found["model-judge_a"][1] == ("judge_costs",)


def test_a_pinned_price_silences_the_model_it_names() -> None:
    pinned = {"model-agent_0": Price(input_per_mtok=1.0, output_per_mtok=2.0)}
    assert sorted(_priced(_report(SPEC, _free(pinned)))) == ["model-agent_1", "model-judge_a"]


def test_a_model_the_service_charged_for_is_not_named() -> None:
    """The synthetic log's agents were charged (a configured table priced them)."""
    assert _priced(_report(SPEC, lambda e: e)) == {}


def test_a_scripted_campaign_is_silent() -> None:
    scripted = LogSpec(campaign_id="priced", n_tasks=3, n_agents=2, rules=False, scripted=True)
    assert _priced(_report(scripted, _free())) == {}


def test_used_models_with_wrong_columns_or_roles_are_refused() -> None:
    good = pl.DataFrame(
        {"campaign_id": ["c"], "role": ["agent"], "model": ["m"], "tokens": [5], "cost_usd": [0.0]},
        schema=USED_MODELS_SCHEMA,
    )
    assert unpriced_models(good, {}) == {"m": ("run_costs", "agent_costs")}
    with pytest.raises(StatisticsInputError, match="columns"):
        unpriced_models(good.drop("tokens"), {})
    with pytest.raises(StatisticsInputError, match=r"unknown roles.*'tool'"):
        unpriced_models(good.with_columns(role=pl.lit("tool")), {})
