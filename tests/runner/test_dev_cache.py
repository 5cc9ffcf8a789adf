"""The development cache in a real run (#50 item 5): a campaign that says ``cache:``
answers an agent's or a judge's model request made before from the cache, each such step
and verdict is marked ``cached_answer`` on its event, audit shows it, and the report
counts both at its top; a judge's samples stay separate draws; a campaign without
``cache:`` asks the models every time."""

from __future__ import annotations

import io
import json
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
from assay_report.state import state_from_json, state_to_json
from assay_report.terminal import print_report
from assay_schemas import (
    AgentStepLogged,
    CacheSpec,
    Event,
    JudgeSpec,
    JudgmentRecorded,
    default_rubric,
)
from assay_testing import pipeline
from assay_testing.scripted import (
    ScriptedModelServer,
    ScriptedSequence,
    ScriptReply,
    ScriptRequest,
)

pytestmark = pytest.mark.timeout(180)

MODEL = "cacheable"
JUDGE_MODEL = "cacheable-judge"
SAMPLES = 2


def _verdicts() -> Callable[[ScriptRequest], ScriptReply]:
    """Each verdict the judge's model gives differs (its rationale counts them), so a
    cached verdict is told from one asked again, and one sample's from another's."""
    given = iter(range(1, 1000))

    def verdict(request: ScriptRequest) -> ScriptReply:
        n = next(given)
        scores = {d.key: {"score": 1 + n % 9, "reason": "r"} for d in default_rubric().dimensions}
        return ScriptReply.call(
            "submit_verdict",
            {
                "scores": scores,
                "failure_tags": [],
                "rationale": f"verdict {n}",
                "files_relied_on": [],
            },
        )

    return verdict


@pytest.fixture
def scripted() -> Iterator[ScriptedModelServer]:
    steps = ScriptedSequence(
        [
            ScriptReply.call("write_file", {"path": "answer.txt", "content": "42\n"}),
            ScriptReply.call("submit", {"answer": "42, in answer.txt"}),
        ]
    )
    with pipeline.scripted_server({MODEL: steps, JUDGE_MODEL: _verdicts()}) as server:
        yield server


def _judged(campaign: str) -> Callable[[list[Event]], bool]:
    def done(evs: list[Event]) -> bool:
        mine = [e for e in evs if isinstance(e, JudgmentRecorded) and e.campaign_id == campaign]
        return len({e.sample for e in mine if e.judge_id == "j1"}) == SAMPLES

    return done


async def test_a_cached_campaign_answers_from_the_cache_and_says_so(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(tmp_path / "t", "t1", "What is the answer?", {"q.txt": "?\n"})
    agent = pipeline.scripted_agent("a1", MODEL, scripted.openai_base_url)
    judge = JudgeSpec(
        judge_id="j1",
        model=JUDGE_MODEL,
        base_url=scripted.openai_base_url,
        api_key_env=pipeline.SCRIPTED_KEY,
        sampling_times=SAMPLES,
    )
    cache = CacheSpec(ttl=timedelta(hours=1))
    async with pipeline.services(settings, store, judges=[judge]):
        for campaign, cached in (("first", cache), ("again", cache), ("uncached", None)):
            spec = pipeline.campaign(campaign, [agent], judges=[judge], cache=cached)
            await pipeline.submit_folder(bus, store, spec, folder)
            events = await pipeline.wait_for_events(bus, _judged(campaign), timeout=90)
    asked = {
        c: [s for s in events if isinstance(s, AgentStepLogged) and s.campaign_id == c]
        for c in ("first", "again", "uncached")
    }
    assert [s.cached_answer for s in asked["first"]] == [False, False]
    assert [s.cached_answer for s in asked["again"]] == [True, True]
    assert [s.cached_answer for s in asked["uncached"]] == [False, False]
    # The model was asked by the first campaign and the uncached one only.
    assert len(scripted.requests(MODEL)) == 4
    assert len(scripted.requests(JUDGE_MODEL)) == 2 * SAMPLES
    # The cached run went as the first did: same calls, same results, same usage.
    for first, again in zip(asked["first"], asked["again"], strict=True):
        assert first.tool_calls == again.tool_calls and first.usage == again.usage
        assert [r.output for r in first.tool_results] == [r.output for r in again.tool_results]
    assert any((settings.home / "cache" / "models").rglob("*.json"))

    # The judge's samples: asked once each, then each served its own verdict again.
    judged = {
        c: sorted(
            (e for e in events if isinstance(e, JudgmentRecorded) and e.campaign_id == c),
            key=lambda e: e.sample,
        )
        for c in ("first", "again", "uncached")
    }
    assert [v.cached_answer for v in judged["first"]] == [False] * SAMPLES
    assert [v.cached_answer for v in judged["again"]] == [True] * SAMPLES
    assert [v.cached_answer for v in judged["uncached"]] == [False] * SAMPLES
    first_said = [v.rationale for v in judged["first"]]
    assert [v.rationale for v in judged["again"]] == first_said
    assert len(set(first_said)) == SAMPLES  # the samples were not collapsed into one answer
    assert not set(first_said) & {v.rationale for v in judged["uncached"]}

    # Audit shows each step as it was.
    run_id = asked["again"][0].run_id or ""
    logged, _ = await load_run_events(bus, run_id)
    chain = [
        line.summary
        for line in audit_run(logged, store).chain
        if line.event_type == "AgentStepLogged"
    ]
    assert len(chain) == 2 and all("answer from the development cache" in s for s in chain)
    verdicts = [
        line.summary
        for line in audit_run(logged, store).chain
        if line.event_type == "JudgmentRecorded" and line.summary.startswith("j1#")
    ]
    assert len(verdicts) == SAMPLES
    assert all("answer from the development cache" in s for s in verdicts)

    # The report counts the cached answers at its top.
    projections = Projections(fold(enumerate(events, 1)))
    report = build_report(projections, campaign="again", n_resamples=20)
    assert report.cached_answers == 2 and report.cached_verdicts == SAMPLES
    # A report from the aggregator's snapshot (what a restart or `replay --verify` reads
    # beside a fresh fold) counts them alike.
    restored = Projections(
        state_from_json(json.loads(json.dumps(state_to_json(projections.state))))
    )
    again = build_report(restored, campaign="again", n_resamples=20)
    assert (again.cached_answers, again.cached_verdicts) == (2, SAMPLES)
    first = build_report(projections, campaign="first", n_resamples=20)
    assert first.cached_answers == 0 and first.cached_verdicts == 0
    out = io.StringIO()
    print_report(report, Console(file=out, width=120))
    head = " ".join(out.getvalue()[:800].split())
    said = "DEVELOPMENT CACHE: 2 agent model answers and 2 judge verdicts came from the local cache"
    assert said in head
    assert said in " ".join(render_html(report).split())
