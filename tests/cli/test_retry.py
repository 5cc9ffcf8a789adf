"""`assay retry`: an infrastructure-failed run is rerun as a new attempt, then judged."""

from __future__ import annotations

import asyncio
from pathlib import Path

import polars as pl
import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.retry import retry_failed
from assay.store import LocalBlobStore
from assay_schemas import JudgmentRecorded, RunFailed, RunRequested, SandboxReady
from assay_testing import pipeline
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply
from tests.judge.cases import judge_spec, reading_judge, verdict
from tests.security.stack import restricted_services

pytestmark = pytest.mark.timeout(120)

AGENT = ScriptedSequence(
    [
        ScriptReply.call("bash", {"command": "echo step"}),
        ScriptReply.call("submit", {"answer": "done"}),
    ],
    repeat_last=True,
)
JUDGE = reading_judge([("list_files", {})], verdict(7))


SCRIPTS = {"agent": AGENT, "judge": JUDGE}
"""What the `scripted` fixture (tests/conftest.py) serves."""


async def test_retry_turns_an_infrastructure_failure_into_a_judged_attempt(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    # The agent's first call takes its time, so the host loses the sandbox before the run
    # uses it: at 0.5 s a loaded machine (the full suite) once destroyed it only after the
    # run had answered and sealed, and no run failed.
    scripted.set_latency("agent", 3.0)
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(tmp_path / "tasks", "t1", "go", {"a.txt": "x"})
    judge = judge_spec("j1", "judge", scripted.openai_base_url)
    spec = pipeline.campaign(
        "c1", [pipeline.scripted_agent("a1", "agent", scripted.openai_base_url)], judges=[judge]
    )
    async with restricted_services(
        lambda user: settings, store, judges=[judge], aggregator=True
    ) as started:
        await pipeline.submit_folder(bus, store, spec, folder, max_bytes=1000)
        events = await pipeline.wait_for_events(
            bus, lambda evs: any(isinstance(e, SandboxReady) for e in evs)
        )
        ready = next(e for e in events if isinstance(e, SandboxReady))
        backend = started["sandbox-manager"].backends["bubblewrap"]
        await asyncio.to_thread(backend.destroy, ready.sandbox_id)  # planted: the host loses it
        events = await pipeline.wait_for_events(
            bus, lambda evs: any(isinstance(e, RunFailed) for e in evs)
        )
        [failed] = [e for e in events if isinstance(e, RunFailed)]
        assert failed.infrastructure
        scripted.set_latency("agent", 0.0)

        [retry] = await retry_failed(bus, campaign="c1")
        assert await retry_failed(bus, campaign="c1") == []  # the latest attempt is running
        events = await pipeline.wait_for_events(
            bus, lambda evs: any(isinstance(e, JudgmentRecorded) for e in evs), timeout=90
        )
        agg = started["aggregator"]
        await agg.wait_for((await bus.js.stream_info(settings.stream)).state.last_seq)
        runs = agg.projections.table("runs")
        stats_runs = agg.projections.statistics_tables().runs
    requests = [e for e in events if isinstance(e, RunRequested)]
    assert [r.attempt for r in requests] == [0, 1]
    assert retry.run_id != failed.run_id and retry.causation_id == failed.event_id
    assert (retry.task_id, retry.agent.agent_id, retry.epoch) == ("t1", "a1", 0)
    [judged] = [e for e in events if isinstance(e, JudgmentRecorded)]
    assert judged.run_id == retry.run_id
    assert any(isinstance(e, RunFailed) and e.run_id == failed.run_id for e in events)
    # Accounting sees both attempts; statistics only the latest.
    assert sorted(runs["attempt"].to_list()) == [0, 1]
    assert runs.filter(pl.col("superseded"))["run_id"].to_list() == [failed.run_id]
    assert stats_runs["run_id"].to_list() == [retry.run_id]
