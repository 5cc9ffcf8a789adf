"""The development cache in a real run (#50 item 5): a campaign that says ``cache:``
answers a model request it made before from the cache, each such step is marked
``cached_answer`` on its event, audit shows it, and the report counts it at its top; a
campaign without ``cache:`` asks the model every time."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from rich.console import Console

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_aggregator import fold
from assay_aggregator.audit import audit_run, load_run_events
from assay_report import Projections, build_report
from assay_report.html import render_html
from assay_report.terminal import print_report
from assay_schemas import AgentFinished, AgentStepLogged, CacheSpec, Event
from assay_testing import pipeline
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

pytestmark = pytest.mark.timeout(180)

MODEL = "cacheable"


@pytest.fixture
def scripted() -> Iterator[ScriptedModelServer]:
    steps = ScriptedSequence(
        [
            ScriptReply.call("write_file", {"path": "answer.txt", "content": "42\n"}),
            ScriptReply.call("submit", {"answer": "42, in answer.txt"}),
        ]
    )
    with pipeline.scripted_server({MODEL: steps}) as server:
        yield server


def _finished(campaign: str) -> Callable[[list[Event]], bool]:
    return lambda evs: any(isinstance(e, AgentFinished) and e.campaign_id == campaign for e in evs)


async def test_a_cached_campaign_answers_from_the_cache_and_says_so(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(tmp_path / "t", "t1", "What is the answer?", {"q.txt": "?\n"})
    agent = pipeline.scripted_agent("a1", MODEL, scripted.openai_base_url)
    cache = CacheSpec(ttl=timedelta(hours=1))
    async with pipeline.services(settings, store):
        for campaign, cached in (("first", cache), ("again", cache), ("uncached", None)):
            spec = pipeline.campaign(campaign, [agent], cache=cached)
            await pipeline.submit_folder(bus, store, spec, folder)
            events = await pipeline.wait_for_events(bus, _finished(campaign), timeout=90)
    asked = {
        c: [s for s in events if isinstance(s, AgentStepLogged) and s.campaign_id == c]
        for c in ("first", "again", "uncached")
    }
    assert [s.cached_answer for s in asked["first"]] == [False, False]
    assert [s.cached_answer for s in asked["again"]] == [True, True]
    assert [s.cached_answer for s in asked["uncached"]] == [False, False]
    # The model was asked by the first campaign and the uncached one only.
    assert len(scripted.requests(MODEL)) == 4
    # The cached run went as the first did: same calls, same results, same usage.
    for first, again in zip(asked["first"], asked["again"], strict=True):
        assert first.tool_calls == again.tool_calls and first.usage == again.usage
        assert [r.output for r in first.tool_results] == [r.output for r in again.tool_results]
    assert any((settings.home / "cache" / "models").rglob("*.json"))

    # Audit shows each step as it was.
    run_id = asked["again"][0].run_id or ""
    logged, _ = await load_run_events(bus, run_id)
    chain = [
        line.summary
        for line in audit_run(logged, store).chain
        if line.event_type == "AgentStepLogged"
    ]
    assert len(chain) == 2 and all("answer from the development cache" in s for s in chain)

    # The report counts the cached answers at its top.
    projections = Projections(fold(enumerate(events, 1)))
    report = build_report(projections, campaign="again", n_resamples=20)
    assert report.cached_answers == 2
    assert build_report(projections, campaign="first", n_resamples=20).cached_answers == 0
    out = io.StringIO()
    print_report(report, Console(file=out, width=120))
    head = out.getvalue()[:600]
    assert "DEVELOPMENT CACHE: 2 model answers came from the local cache" in head
    assert "DEVELOPMENT CACHE: 2 model answers" in render_html(report)
