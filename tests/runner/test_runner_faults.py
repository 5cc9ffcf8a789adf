"""The sandbox vanishing mid-run, and tasks published raw by another system."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.sandbox_client import SandboxGone
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_schemas import (
    AgentFinished,
    ArtifactsSealed,
    RunFailed,
    RunRequested,
    SandboxReady,
    derive_id,
)
from assay_testing import pipeline
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

WORKER = ScriptedSequence(
    [ScriptReply.call("bash", {"command": "echo step"})] * 3
    + [ScriptReply.call("submit", {"answer": "done"})]
)


SCRIPTS = {"worker": WORKER}
"""What the `scripted` fixture (tests/conftest.py) serves."""


async def test_sandbox_disappearing_is_an_infrastructure_failure(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    scripted.set_latency("worker", 0.5)
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(tmp_path / "tasks", "t1", "go", {"a.txt": "x"})
    async with pipeline.services(settings, store) as started:
        await submit_campaign(
            bus,
            store,
            pipeline.campaign(
                "c1", [pipeline.scripted_agent("a1", "worker", scripted.openai_base_url)]
            ),
            load_tasks(folder, max_bytes=1000),
        )
        events = await pipeline.wait_for_events(
            bus, lambda evs: any(isinstance(e, SandboxReady) for e in evs)
        )
        ready = next(e for e in events if isinstance(e, SandboxReady))
        backend = started["sandbox-manager"].backends["bubblewrap"]  # type: ignore[attr-defined]
        await asyncio.to_thread(backend.destroy, ready.sandbox_id)  # the host loses it
        events = await pipeline.wait_for_events(
            bus, lambda evs: any(isinstance(e, RunFailed) for e in evs)
        )
    [failed] = [e for e in events if isinstance(e, RunFailed)]
    assert failed.infrastructure and failed.stage == "agent"
    assert "sandbox disappeared" in failed.error and ready.sandbox_id in failed.error


async def test_a_fault_met_after_the_run_ended_is_not_a_second_end(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    """A drive retried after the bus failed (or redelivered to another replica) can read
    the run's history from before its end, then find the sandbox sealed and destroyed
    (the compose campaign met it when its stream leader was killed): that fault must not
    be published as the run's end, which the log would refuse as a second one."""
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(tmp_path / "tasks", "t1", "go", {"a.txt": "x"})
    spec = pipeline.campaign(
        "c1", [pipeline.scripted_agent("a1", "worker", scripted.openai_base_url)]
    )
    async with pipeline.services(settings, store) as started:
        await pipeline.submit_folder(bus, store, spec, folder, max_bytes=1000)
        events = await pipeline.wait_for_events(
            bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
        )
        [request] = [e for e in events if isinstance(e, RunRequested)]
        [ready] = [e for e in events if isinstance(e, SandboxReady)]
        assert any(isinstance(e, AgentFinished) for e in events)
        before = len(events)
        gone = SandboxGone(f"sandbox {ready.sandbox_id}: destroyed on instance {ready.instance}")
        await started["runner"].end_with_fault(request, ready, gone)
        after = [e.event async for e in bus.replay()]
    assert len(after) == before, [e.event_type for e in after[before:]]
    assert not any(isinstance(e, RunFailed) for e in after)


async def test_task_published_raw_by_another_system_is_picked_up(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    first = pipeline.write_task(tmp_path / "tasks", "first", "go", {"a.txt": "x"})
    spec = pipeline.campaign(
        "live", [pipeline.scripted_agent("a1", "worker", scripted.openai_base_url)]
    )
    async with pipeline.services(settings, store):
        await pipeline.submit_folder(bus, store, spec, first, max_bytes=1000)
        await pipeline.wait_for_events(
            bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
        )
        # Another system: plain JSON (per schemas/json/TaskSubmitted.json) on the subject layout.
        blob = store.put_bytes(b"gene,count\nA,3\n")
        payload = {
            "event_id": derive_id("external", "live", "second"),
            "event_type": "TaskSubmitted",
            "occurred_at": "2026-11-29T10:00:00Z",
            "campaign_id": "live",
            "task_id": "second",
            "producer": {"service": "lims", "version": "7.1"},
            "task": {
                "task_id": "second",
                "prompt": "count genes pls",
                "attachments": [
                    {
                        "path": "counts.csv",
                        "sha256": blob.sha256,
                        "size": blob.size,
                        "media_type": "text/csv",
                    }
                ],
                "source": "lims",
            },
        }
        subject = bus.subjects.event("TaskSubmitted", "live", "-")
        await bus.js.publish(
            subject, json.dumps(payload).encode(), headers={"Nats-Msg-Id": payload["event_id"]}
        )
        events = await pipeline.wait_for_events(
            bus, lambda evs: sum(isinstance(e, ArtifactsSealed) for e in evs) == 2
        )
    runs = {e.task_id for e in events if isinstance(e, RunRequested)}
    assert runs == {"first", "second"}
    sealed = next(e for e in events if isinstance(e, ArtifactsSealed) and e.task_id == "second")
    assert "counts.csv" in {f.path for f in sealed.files}
