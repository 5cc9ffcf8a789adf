"""The warm pool: sandboxes made ahead of their run's drive, bounded, and a queued run's
wait never counted as its own time.

A campaign's runs are all requested when its tasks are admitted; each run's sandbox is
made before a runner takes the run, so that making it is off the run's critical path.
Before `sandbox_warm`, every requested run got its sandbox at once (up to `max_live`,
4,096): a queue of a thousand runs at concurrency 1 held a thousand idle sandboxes, and
the reaper counted each one's wait in the queue against its wall clock.
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

from assay.bus import Bus
from assay.config import Settings
from assay.sandbox_client import SandboxClient
from assay.store import LocalBlobStore
from assay_sandbox_manager.backends import BubblewrapBackend
from assay_sandbox_manager.handlers import SandboxService
from assay_sandbox_manager.service import build
from assay_schemas import (
    AgentFinished,
    ArtifactsSealed,
    Event,
    Limits,
    RunFailed,
    SandboxReady,
    SandboxSpec,
    Task,
    Usage,
)
from assay_testing import events as made
from assay_testing.pipeline import wait_for_events

SPEC = SandboxSpec(memory_mb=512, exec_timeout_s=20)
TASK = Task(task_id="t1", prompt="p")


def _manager(settings: Settings, **own: object) -> SandboxService:
    state = settings.instance_state
    backend = BubblewrapBackend(state / "bwrap", state / "seals")
    return build(
        settings.model_copy(update=own),
        store=LocalBlobStore(settings.blob_dir),
        backends={"bubblewrap": backend},
    )


def _ready(events: list[Event]) -> list[SandboxReady]:
    return [e for e in events if isinstance(e, SandboxReady)]


def _made(n: int, events: list[Event]) -> bool:
    return len(_ready(events)) >= n


def _finished(bus: Bus, run_id: str) -> AgentFinished:
    return AgentFinished(
        event_id=AgentFinished.id_for(run_id),
        campaign_id="c1",
        run_id=run_id,
        stop_reason="submitted",
        final_message="done",
        steps=1,
        usage=Usage(),
        producer=bus.producer,
    )


def _client(bus: Bus, ready: SandboxReady) -> SandboxClient:
    return SandboxClient(bus=bus, instance=ready.instance, sandbox_id=ready.sandbox_id)


async def test_sandboxes_made_ahead_stop_at_the_warm_pool_and_follow_the_drives(
    bus: Bus, settings: Settings
) -> None:
    service = _manager(settings, sandbox_warm=2)
    live = service.backends["bubblewrap"]
    runs = [f"r{i}" for i in range(5)]
    await service.start()
    try:
        for run in runs:
            await bus.publish(
                made.run_requested(run, task=TASK, sandbox=SPEC, producer=bus.producer)
            )
        events = await wait_for_events(bus, lambda evs: len(_ready(evs)) >= 2)
        await asyncio.sleep(1.5)  # time enough for more, were they allowed
        events = [e.event async for e in bus.replay()]
        assert len(_ready(events)) == 2 and len(live.list_live()) == 2
        driven: set[str] = set()
        while len(driven) < len(runs):
            # A runner takes the oldest sandbox waiting: the pool makes the next one.
            waiting = [r for r in _ready(events) if r.run_id not in driven]
            take = waiting[0]
            assert take.run_id is not None
            await _client(bus, take).claim()
            driven.add(take.run_id)
            made_next = min(len(runs), len(driven) + 2)
            events = await wait_for_events(bus, partial(_made, made_next))
            await asyncio.sleep(0.3)
            events = [e.event async for e in bus.replay()]
            assert len(_ready(events)) == made_next, "never more than 2 waiting for a drive"
            await bus.publish(_finished(bus, take.run_id))
        events = await wait_for_events(
            bus, lambda evs: sum(isinstance(e, ArtifactsSealed) for e in evs) == len(runs)
        )
        assert sorted(r.run_id or "" for r in _ready(events)) == runs
    finally:
        await service.stop()


async def test_a_queued_run_is_not_overdue_while_drives_go_on_and_is_once_they_stop(
    bus: Bus, settings: Settings
) -> None:
    """Run A is driven; run B's sandbox waits its turn. Past the wall clock and the grace,
    A is overdue (its drive stopped ending it) and B is not (a runner is at work here);
    once no drive has been seen for as long, B is overdue too (the runners are gone)."""
    service = _manager(settings)
    service.overdue_grace_s, service.overdue_check_s = 0.5, 3600.0
    limits = Limits(wall_clock_s=1.0)
    await service.start()
    try:
        for run in ("ra", "rb"):
            request = made.run_requested(
                run, task=TASK, sandbox=SPEC, limits=limits, producer=bus.producer
            )
            await bus.publish(request)
        events = await wait_for_events(bus, lambda evs: len(_ready(evs)) == 2)
        [a] = [r for r in _ready(events) if r.run_id == "ra"]
        drive = _client(bus, a)
        for _ in range(10):  # the drive at work for 2 s, past A's 1.5 s
            await drive.claim()
            await asyncio.sleep(0.2)
        assert await service.end_overdue() == ["ra"]
        await asyncio.sleep(1.7)  # no drive seen here for longer than B's 1.5 s
        assert await service.end_overdue() == ["rb"]
        events = await wait_for_events(
            bus, lambda evs: sum(isinstance(e, ArtifactsSealed) for e in evs) == 2
        )
    finally:
        await service.stop()
    failed = {e.run_id: e for e in events if isinstance(e, RunFailed)}
    assert "held its sandbox" in failed["ra"].error
    assert "waited" in failed["rb"].error and "for a runner" in failed["rb"].error


async def test_a_request_waiting_for_the_pool_is_opened_when_a_drive_claims_another(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    """Claims, not ends, free the pool: with one warm sandbox and its run driven for a
    long time, the next run's sandbox is made at once, not after the first run's end."""
    service = _manager(settings, sandbox_warm=1)
    await service.start()
    try:
        for run in ("r0", "r1", "r2"):
            await bus.publish(
                made.run_requested(run, task=TASK, sandbox=SPEC, producer=bus.producer)
            )
        events = await wait_for_events(bus, lambda evs: len(_ready(evs)) >= 1)
        [first] = _ready(events)
        await _client(bus, first).claim()
        events = await wait_for_events(bus, lambda evs: len(_ready(evs)) >= 2)
        await asyncio.sleep(0.5)
        events = [e.event async for e in bus.replay()]
        assert [r.run_id for r in _ready(events)] == ["r0", "r1"]
        for ready in _ready(events):
            assert ready.run_id is not None
            await bus.publish(_finished(bus, ready.run_id))
        # r1 was never claimed: its end frees its place; r2's sandbox is made.
        events = await wait_for_events(bus, lambda evs: len(_ready(evs)) == 3)
        await bus.publish(_finished(bus, "r2"))
        await wait_for_events(
            bus, lambda evs: sum(isinstance(e, ArtifactsSealed) for e in evs) == 3
        )
    finally:
        await service.stop()
