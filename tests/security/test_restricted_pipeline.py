"""The least-privilege users are sufficient: a whole run, each service as its own user."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_schemas import ArtifactsSealed, JudgmentRecorded, TaskRejected
from assay_testing.pipeline import (
    campaign,
    scripted_agent,
    wait_for_events,
    write_task,
)
from assay_testing.scripted import ScriptedModelServer
from tests.judge.cases import judge_spec

from .conftest import SecureNats
from .stack import connected, restricted_services, row_counter

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def scripted() -> Iterator[ScriptedModelServer]:
    """Agent and judge models on one scripted server."""
    with row_counter("ls && mkdir -p out && wc -l data.csv > out/n.txt", 8) as server:
        yield server


async def test_run_is_judged_and_folded_with_restricted_users(
    secure: SecureNats, admin_bus: Bus, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    store = LocalBlobStore(secure.base.blob_dir)
    folder = write_task(tmp_path / "tasks", "rows", "count rows", {"data.csv": "a\n1\n2\n"})
    judge = judge_spec("j1", "judge", scripted.openai_base_url)
    spec = campaign(
        "c1", [scripted_agent("agent", "agent", scripted.openai_base_url)], judges=[judge]
    )
    cli = await connected(secure.settings("cli"), "cli")
    try:
        async with restricted_services(
            secure.settings, store, judges=[judge], aggregator=True
        ) as started:
            await submit_campaign(cli, store, spec, load_tasks(folder, max_bytes=10_000))
            events = await wait_for_events(
                cli, lambda evs: any(isinstance(e, JudgmentRecorded) for e in evs), timeout=40
            )
            agg = started["aggregator"]
            head = (await cli.js.stream_info(secure.base.stream)).state.last_seq
            await agg.wait_for(head, timeout=10)
    finally:
        await cli.stop()
    kinds = [e.event_type for e in events]
    assert {"RunRequested", "SandboxReady", "AgentStepLogged", "AgentFinished"} <= set(kinds)
    assert any(isinstance(e, ArtifactsSealed) for e in events)
    assert secure.violations() == []


async def test_dead_letters_and_reports_work_with_restricted_users(
    secure: SecureNats, admin_bus: Bus
) -> None:
    from assay_aggregator.rebuild import fold_stream
    from assay_runner.service import build as build_runner

    subject = f"{secure.base.subject_prefix}.ev.TaskSubmitted.c1.-"
    await admin_bus.js.publish(subject, b"not an event", stream=secure.base.stream)
    runner = build_runner(secure.settings("runner"))
    await runner.bus.start()
    cli = await connected(secure.settings("cli"), "cli")
    try:
        for _ in range(100):  # the runner dead-letters the bad message on its own
            letters = await cli.dead_letters("runner-tasks")
            if letters:
                break
            await asyncio.sleep(0.1)
        assert [body for body, _ in letters] == [b"not an event"]
        # The runner answers the sender on the campaign's TaskRejected subject.
        for _ in range(100):
            answers = [
                e.event async for e in cli.replay(subject=cli.subjects.event("TaskRejected"))
            ]
            if answers:
                break
            await asyncio.sleep(0.1)
        [rejected] = answers
        assert isinstance(rejected, TaskRejected) and rejected.reason == "invalid"
        # `assay report` folds the log as the cli user.
        state = await fold_stream(cli.js, cli.stream.name, cli.subjects.events)
        assert state.last_sequence == 2
    finally:
        await cli.stop()
        await runner.bus.stop()
    assert secure.violations() == []
