"""Web tools end to end through the real runner, sandbox, judge and store.

A scripted agent searches (a SearXNG stand-in), fetches a page (a web stand-in), and
submits; a scripted judge opens the page it read. The campaign runs recording its web,
then the same tasks run replaying it with both stand-ins stopped: the transcripts and the
judges' inputs are the same bytes, and `assay audit` re-verifies every web blob.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_aggregator.audit import audit_run, load_run_events
from assay_runner.web import import_snapshot, index_from_log, index_from_snapshot
from assay_schemas import (
    AgentSpec,
    AgentStepLogged,
    CampaignSpec,
    Event,
    JudgeSpec,
    JudgmentFailed,
    JudgmentRecorded,
    RunFailed,
    WebSpec,
)
from assay_testing.pipeline import (
    SCRIPTED_KEY,
    campaign,
    scripted_agent,
    services,
    settings_env,
    wait_for_events,
    write_task,
)
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply
from tests.judge.cases import judge_spec, reading_judge, verdict
from tests.webstand import STAND_IN, STAND_IN_POLICY, WebStandIn, html_page, searxng_results


@pytest.fixture
def scripted() -> Iterator[ScriptedModelServer]:
    os.environ[SCRIPTED_KEY] = "scripted"
    with ScriptedModelServer({}) as server:
        yield server


def _agent(page_url: str) -> ScriptedSequence:
    return ScriptedSequence(
        [
            ScriptReply.call("web_search", {"query": "bacterial doubling time rich medium"}),
            ScriptReply.call("web_fetch", {"url": page_url}),
            ScriptReply.call(
                "submit", {"answer": "E. coli doubles in about 20 minutes in rich medium [1]."}
            ),
        ]
    )


def _web(mode: str, search_url: str, **extra: Any) -> WebSpec:
    return WebSpec.model_validate(
        {"mode": mode, "search": {"kind": "searxng", "url": search_url}, **extra}
    )


def _transcript(events: list[Event], campaign_id: str) -> list[list[tuple[Any, ...]]]:
    """Per run, every tool result as the model saw it and its sources (timing aside)."""
    runs: dict[str, list[tuple[Any, ...]]] = {}
    for e in events:
        if isinstance(e, AgentStepLogged) and e.campaign_id == campaign_id:
            for r in e.tool_results:
                sources = [s.model_dump(mode="json") for s in r.sources]
                runs.setdefault(e.run_id or "", []).append((e.step, r.name, r.output, sources))
    return [sorted(steps) for _, steps in sorted(runs.items())]


def _judge_inputs(server: ScriptedModelServer) -> list[str]:
    """Every judge request's messages (the case, then each tool result), in a fixed order:
    the judges of two epochs interleave."""
    return sorted(json.dumps(r.body["messages"]) for r in server.requests("judge") if r.body)


async def _run(
    bus: Bus,
    settings: Settings,
    store: LocalBlobStore,
    spec: CampaignSpec,
    tasks: Path,
    judges: list[Any],
) -> list[Event]:
    async with services(settings, store, judges=judges, web_net=STAND_IN_POLICY):
        await submit_campaign(bus, store, spec, load_tasks(tasks, max_bytes=10_000))
        runs = spec.epochs

        def judged(evs: list[Event]) -> bool:
            failed = [e for e in evs if isinstance(e, JudgmentFailed | RunFailed)]
            assert not failed, failed
            mine = [e for e in evs if isinstance(e, JudgmentRecorded)]
            return sum(e.campaign_id == spec.campaign_id for e in mine) == runs

        return await wait_for_events(bus, judged, timeout=120)


class Recorded(NamedTuple):
    """A campaign that recorded its web through the stand-ins (stopped since): its log,
    its tasks, agent and judge, the stand-ins' base address and the page read."""

    events: list[Event]
    store: LocalBlobStore
    tasks: Path
    agent: AgentSpec
    judge: JudgeSpec
    web_base: str
    page_url: str


async def record_ecoli(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> Recorded:
    """Campaign "rec": an agent searches and reads a page about E. coli's doubling time,
    a judge reads the page back; the web is recorded, then its stand-ins stop."""
    store = LocalBlobStore(settings.blob_dir)
    tasks = tmp_path / "tasks"
    write_task(tasks, "doubling", "How fast does E. coli double in rich medium?", {"n.txt": "x"})
    web = WebStandIn(host=STAND_IN).__enter__()
    page_url = f"{web.base}/ecoli"
    web.routes["/search"] = searxng_results(
        ("E. coli growth", page_url, "Doubling time of about 20 minutes in LB."),
    )
    web.routes["/ecoli"] = html_page(
        "E. coli growth", "<p>In rich medium E. coli doubles about every 20 minutes.</p>"
    )
    scripted.add_script("agent", _agent(page_url))
    scripted.add_script(
        "judge",
        reading_judge(
            [("read_file", {"path": "web-source:2"})], verdict(8, files=["web-source:2"])
        ),
    )
    judge = judge_spec("j1", "judge", scripted.openai_base_url)
    agent = scripted_agent("a1", "agent", scripted.openai_base_url)
    try:
        recorded = campaign("rec", [agent], judges=[judge], web=_web("record", web.base))
        events = await _run(bus, settings, store, recorded, tasks, [judge])
    finally:
        web.stop()  # from here on, nothing answers at the stand-ins' addresses
    return Recorded(events, store, tasks, agent, judge, web.base, page_url)


async def _travels(bus: Bus, settings: Settings, tmp_path: Path) -> None:
    """`assay web export` writes the recorded web; imported elsewhere, it is the same cache."""
    tar = tmp_path / "web.tar"
    cli = [sys.executable, "-m", "assay_cli", "web", "export", "--campaign", "rec", "--out"]
    done = subprocess.run(
        [*cli, str(tar)], env=settings_env(settings), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "wrote 2 web answers" in done.stdout
    elsewhere = LocalBlobStore(tmp_path / "elsewhere")
    sha = import_snapshot(elsewhere, tar)
    assert await index_from_snapshot(elsewhere, sha) == await index_from_log(bus, "rec")


async def test_search_fetch_record_then_replay_gives_the_same_bytes_to_agents_and_judges(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    events, store, tasks, agent, judge, web_base, page_url = await record_ecoli(
        bus, settings, tmp_path, scripted
    )
    record_transcript = _transcript(events, "rec")
    [steps] = record_transcript
    search, fetch = steps[0], steps[1]
    assert search[1] == "web_search" and "1. E. coli growth" in search[2] and page_url in search[2]
    assert fetch[1] == "web_fetch" and "doubles about every 20 minutes" in fetch[2]
    assert [s["kind"] for s in search[3] + fetch[3]] == ["search", "fetch"]
    record_judge = _judge_inputs(scripted)
    case = min((json.loads(turn) for turn in record_judge), key=len)[-1]["content"]
    assert "# Web sources the agent read" in case
    assert f"web-source:2  fetch {page_url}" in case and "HTTP 200" in case
    assert any("doubles about every 20 minutes" in turn for turn in record_judge)
    [judged] = [e for e in events if isinstance(e, JudgmentRecorded)]
    assert "web-source:2" in judged.files_opened

    await _travels(bus, settings, tmp_path)

    scripted.clear_requests()
    replayed = campaign(
        "rep", [agent], judges=[judge], epochs=2, web=_web("replay", web_base, cache="rec")
    )
    events = await _run(bus, settings, store, replayed, tasks, [judge])
    replay_transcript = _transcript(events, "rep")
    assert replay_transcript == record_transcript * 2  # both epochs, the recorded bytes
    assert _judge_inputs(scripted) == sorted(record_judge * 2)

    # The audit re-hashes each web blob like any other.
    run_id = next(e.run_id for e in events if isinstance(e, AgentStepLogged))
    run_events, signers = await load_run_events(bus, run_id or "", None)
    audit = audit_run(run_events, store, signers=signers)
    web_blobs = [b for b in audit.blobs if b.role.startswith("web_")]
    assert {b.role for b in web_blobs} == {"web_text", "web_body"}
    assert all(b.status == "ok" for b in web_blobs)
