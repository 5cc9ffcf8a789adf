"""Finding 1 (issue #24) end to end: a program agent's huge final answer, in a one-process
stack (sandbox-manager, runner and rule judge on one event loop).

Every service keeps answering (the loop never stalls; the runner admits a new task within
1 s) and the run is judged within the check budget: an answer too long for one event is
inlined as its start, and stored whole as a blob that the judges read."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_judge import build_rules
from assay_judge.settings import JudgeSettings
from assay_schemas import (
    FINAL_MESSAGE_INLINE_CHARS,
    MAX_EVENT_BYTES,
    AgentFinished,
    AgentSpec,
    ArtifactsSealed,
    Event,
    JudgmentFailed,
    JudgmentRecorded,
    ProgramSpec,
    RunFailed,
    TaskAccepted,
    TaskSubmitted,
)
from assay_testing.pipeline import campaign, scripted_agent, services, wait_for_events, write_task

pytestmark = pytest.mark.timeout(300)

ANSWERS = {
    "1 MB": "'A' * 1_000_000",
    "10 MB": "'A' * 9_999_999 + 'Z'",
    # Every shape that was quadratic for some rule pattern, 1 MB in all.
    "pathological": (
        "'A' * 150_000 + ' ' + 'a/' * 80_000 + ' ' + 'a.' * 80_000 + ' <' + ' ' * 80_000"
        " + 'p<' * 80_000 + ' ' + '1' * 80_000 + ' ' + 'ignore ' * 10_000"
    ),
}


def _agent(answer: str) -> AgentSpec:
    code = f"open('answer.txt', 'w').write({answer})"
    program = ProgramSpec(command=["python3", "-c", code], answer_file="answer.txt")
    return scripted_agent("big", "none", "http://127.0.0.1:9/v1", kind="program", program=program)


def _ended(events: list[Event], campaign_id: str) -> bool:
    ends = (JudgmentRecorded, JudgmentFailed, RunFailed)
    return any(isinstance(e, ends) and e.campaign_id == campaign_id for e in events)


@pytest.mark.parametrize("size", sorted(ANSWERS))
async def test_a_huge_final_answer_starves_no_service(
    bus: Bus, settings: Settings, tmp_path: Path, size: str
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    huge = write_task(tmp_path / "t1", "huge", "Say a lot.", {"a.csv": "x\n1\n"})
    small = write_task(tmp_path / "t2", "small", "Say little.", {"a.csv": "x\n1\n"})
    lags: list[float] = []

    async def heartbeat() -> None:
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.05)
            lags.append(time.monotonic() - t - 0.05)

    async with services(settings, store):
        rules = build_rules(settings, store=store)
        await rules.start()
        beat = asyncio.create_task(heartbeat())
        try:
            spec = campaign("c1", [_agent(ANSWERS[size])])
            await submit_campaign(bus, store, spec, load_tasks(huge, max_bytes=10_000))
            await wait_for_events(
                bus,
                lambda evs: any(isinstance(e, (ArtifactsSealed, RunFailed)) for e in evs),
                timeout=120,
            )
            # While the rule judge works on the huge answer, a new task is admitted at once.
            other = campaign("c2", [_agent("'fine'")])
            await submit_campaign(bus, store, other, load_tasks(small, max_bytes=10_000))
            events = await wait_for_events(
                bus,
                lambda evs: any(isinstance(e, TaskAccepted) and e.campaign_id == "c2" for e in evs),
            )
            [submitted] = [
                e for e in events if isinstance(e, TaskSubmitted) and e.campaign_id == "c2"
            ]
            [accepted] = [
                e for e in events if isinstance(e, TaskAccepted) and e.campaign_id == "c2"
            ]
            assert (accepted.occurred_at - submitted.occurred_at).total_seconds() < 1.0
            # The huge run is judged or fails with a reason, within the checks' budget.
            events = await wait_for_events(bus, lambda evs: _ended(evs, "c1"), timeout=60)
        finally:
            beat.cancel()
            await rules.stop()
    ends = (JudgmentRecorded, JudgmentFailed, RunFailed)
    [end] = [e for e in events if isinstance(e, ends) and e.campaign_id == "c1"]
    # Judged by the rules, within the budget, however long the answer.
    assert isinstance(end, JudgmentRecorded) and end.judge_id == "rules", end
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed) and e.campaign_id == "c1"]
    took = (end.occurred_at - sealed.occurred_at).total_seconds()
    assert took < JudgeSettings.of(settings).judge_check_budget_s, took
    assert max(lags) < 1.0, max(lags)
    # Each event holds the answer's start; the whole answer is one blob, the same for both.
    [finished] = [e for e in events if isinstance(e, AgentFinished) and e.campaign_id == "c1"]
    whole = eval(ANSWERS[size]).strip()  # what the program wrote, as the runner reads it
    for event in (finished, sealed):
        assert len(event.model_dump_json().encode()) <= MAX_EVENT_BYTES
        assert event.final_message == whole[:FINAL_MESSAGE_INLINE_CHARS]
        assert event.final_message_truncated
        assert event.final_message_blob is not None
        assert store.get_bytes(event.final_message_blob.sha256).decode() == whole
    assert sealed.final_message_blob == finished.final_message_blob
