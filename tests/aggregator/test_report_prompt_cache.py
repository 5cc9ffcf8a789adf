"""The report's prompt-cache accounting: each agent's and judge's cached share of input
tokens and what caching saved, priced with the campaign's pinned prices."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from assay.pricing import cost
from assay_aggregator import fold
from assay_report import Projections, build_report, report_json
from assay_report.html import render_html
from assay_report.prompt_cache import PromptCacheUse, saved_usd
from assay_report.report import Report
from assay_schemas import (
    AgentFinished,
    CampaignStarted,
    Event,
    JudgmentRecorded,
    Price,
    RunRequested,
    Usage,
)
from assay_testing.synthetic_log import LogSpec, synthetic_events

SPEC = LogSpec(campaign_id="cached", n_tasks=3, n_agents=2, rules=False, seed=3)
PRICE = Price(
    input_per_mtok=3.0, output_per_mtok=15.0, cached_input_per_mtok=0.3, cache_write_per_mtok=3.75
)
RUN = Usage(input_tokens=10_000, output_tokens=500, cached_tokens=8_000, cache_write_tokens=1_000)
VERDICT = Usage(input_tokens=4_000, output_tokens=300, cached_tokens=1_000)


def _cached(e: Event) -> Event:
    """Pin agent_0's and judge_a's prices; give every run and judge_a's verdicts cache use."""
    if isinstance(e, CampaignStarted):
        prices = {"model-agent_0": PRICE, "model-judge_a": PRICE}
        return e.model_copy(update={"campaign": e.campaign.model_copy(update={"prices": prices})})
    if isinstance(e, AgentFinished):
        return e.model_copy(update={"usage": RUN, "cost_usd": cost(RUN, "m", {"m": PRICE})})
    if isinstance(e, JudgmentRecorded) and e.judge_id == "judge_a":
        return e.model_copy(update={"usage": VERDICT})
    return e


def _report(edit: Callable[[Event], Event]) -> Report:
    events = (edit(e) for e in synthetic_events(SPEC))
    return build_report(Projections(fold(enumerate(events, 1))), n_resamples=50)


def _row(report: Report, member: str) -> PromptCacheUse:
    [row] = [r for r in report.prompt_cache if r.member_id == member]
    return row


def test_each_agent_and_judge_has_its_cached_share_and_saving() -> None:
    report = _report(_cached)
    agent = _row(report, "agent_0")
    assert agent.role == "agent" and agent.model == "model-agent_0"
    assert agent.input_tokens == RUN.input_tokens * agent.n
    assert agent.cached_share == pytest.approx(0.8)
    assert agent.cache_write_tokens == 1_000 * agent.n
    # Reads at 0.3 instead of 3.0, writes at 3.75 instead of 3.0, per million tokens.
    per_run = (8_000 * (3.0 - 0.3) - 1_000 * (3.75 - 3.0)) / 1e6
    assert agent.saved_usd == pytest.approx(per_run * agent.n)
    judge = _row(report, "judge_a")
    assert judge.role == "judge" and judge.cached_share == pytest.approx(0.25)
    assert judge.saved_usd == pytest.approx(judge.n * 1_000 * 2.7 / 1e6)
    # A judge whose verdicts logged no tokens: no share to give, nothing saved.
    other = _row(report, "judge_b")
    assert other.input_tokens == 0 and math.isnan(other.cached_share) and other.saved_usd == 0


def test_a_provider_without_cache_fields_saves_nothing_and_costs_in_full() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=10)
    assert saved_usd(usage, "m", {"m": PRICE}) == 0
    assert cost(usage, "m", {"m": PRICE}) == pytest.approx((1_000 * 3.0 + 10 * 15.0) / 1e6)


def test_a_cache_written_and_never_read_saves_less_than_nothing() -> None:
    written = Usage(input_tokens=2_000, cache_write_tokens=2_000)
    assert saved_usd(written, "m", {"m": PRICE}) == pytest.approx(-2_000 * 0.75 / 1e6)


def test_an_unpriced_model_saves_nothing_and_the_rules_judge_is_not_listed() -> None:
    report = _report(_cached)
    unpriced = _row(report, "agent_1")  # model-agent_1 has no price
    assert unpriced.cached_share == pytest.approx(0.8) and unpriced.saved_usd == 0
    assert all(r.member_id != "rules" for r in report.prompt_cache)
    assert not math.isnan(_row(report, "judge_a").cached_share)


def test_the_report_json_and_html_carry_the_section() -> None:
    report = _report(_cached)
    assert b'"prompt_cache"' in report_json(report)
    assert "Prompt caching" in render_html(report)


def test_a_members_saving_over_campaigns_priced_apart_is_the_sum_of_its_runs() -> None:
    """The rows price summed tokens once per campaign; cost is linear in each kind of
    token, so that must equal pricing every run with its own campaign's prices and adding
    (checked here by doing exactly that, run by run)."""
    cheap = Price(input_per_mtok=1.0, output_per_mtok=2.0, cached_input_per_mtok=0.1)
    dear = PRICE
    specs = {"c-cheap": cheap, "c-dear": dear}
    events: list[Event] = []
    expected = 0.0
    agent_of: dict[str | None, str] = {}
    for campaign_id, price in specs.items():
        spec = LogSpec(campaign_id=campaign_id, n_tasks=3, n_agents=2, rules=False, seed=5)
        for i, e in enumerate(synthetic_events(spec)):
            if isinstance(e, RunRequested):
                agent_of[e.run_id] = e.agent.agent_id
            if isinstance(e, CampaignStarted):
                prices = {"model-agent_0": price}
                campaign = e.campaign.model_copy(update={"prices": prices})
                e = e.model_copy(update={"campaign": campaign})
            elif isinstance(e, AgentFinished):
                usage = Usage(
                    input_tokens=5_000 + 37 * i,
                    output_tokens=100 + i,
                    cached_tokens=1_000 + 11 * i,
                    cache_write_tokens=300 + 7 * i,
                )
                e = e.model_copy(update={"usage": usage})
                if agent_of[e.run_id] == "agent_0":
                    expected += saved_usd(usage, "model-agent_0", {"model-agent_0": price})
            events.append(e)
    report = build_report(Projections(fold(enumerate(events, 1))), n_resamples=50)
    rows = [r for r in report.prompt_cache if r.member_id == "agent_0"]
    assert len(rows) == 1 and rows[0].n == 2 * 3  # one row over both campaigns
    assert rows[0].saved_usd == pytest.approx(expected, rel=1e-12)
    assert expected != 0
