"""A message redelivered while this process still handles it (a heartbeat came late: the
event loop was busy) must not start a second agent loop on the run's sandbox, nor open its
sandbox again (which would destroy the one in use as "half-made")."""

from __future__ import annotations

import asyncio
from typing import Any

from assay.bus import Bus, Delivery
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_runner.handlers import RunnerService
from assay_sandbox_manager.handlers import SandboxService
from assay_schemas import AgentSpec, Limits, RunRequested, SandboxReady, SandboxSpec, Task


def _request(bus: Bus) -> RunRequested:
    return RunRequested(
        event_id=RunRequested.id_for("r1"), campaign_id="c1", run_id="r1", task_id="t1",
        task=Task(task_id="t1", prompt="p"), agent=AgentSpec(agent_id="a1", model="m"),
        epoch=0, limits=Limits(), sandbox=SandboxSpec(), producer=bus.producer,
    )  # fmt: skip


def _ready(bus: Bus) -> SandboxReady:
    return SandboxReady(
        event_id=SandboxReady.id_for("r1"), campaign_id="c1", run_id="r1", task_id="t1",
        sandbox_id="r1", backend="bubblewrap", instance="vm", image_digest="d", workspace=[],
        producer=bus.producer,
    )  # fmt: skip


class _Slow:
    """Stands in for the work a delivery starts: counts starts, ends when released."""

    def __init__(self) -> None:
        self.started = 0
        self.release = asyncio.Event()

    async def __call__(self, *_: Any) -> None:
        self.started += 1
        await self.release.wait()


async def _twice(handler: Any, event: Any, work: _Slow) -> None:
    first = asyncio.create_task(handler(event, Delivery(1, 1)))
    await asyncio.sleep(0.05)
    again = asyncio.create_task(handler(event, Delivery(1, 2)))  # the redelivery
    await asyncio.sleep(0.05)
    assert work.started == 1, "the redelivery started the work a second time"
    assert not again.done(), "the redelivery keeps its message until the first is done"
    work.release.set()
    await asyncio.wait_for(asyncio.gather(first, again), 5)
    assert work.started == 1


async def test_a_redelivered_sandbox_ready_waits_for_the_run_being_driven(
    bus: Bus, settings: Settings
) -> None:
    runner = RunnerService(bus=bus, store=LocalBlobStore(settings.blob_dir))
    work = _Slow()
    runner._run = work  # type: ignore[method-assign]
    await _twice(runner.on_sandbox_ready, _ready(bus), work)
    assert runner._driving == {}


async def test_a_redelivered_run_request_does_not_open_the_sandbox_again(
    bus: Bus, settings: Settings
) -> None:
    manager = SandboxService(
        bus=bus, store=LocalBlobStore(settings.blob_dir), backends={}, instance="vm"
    )
    work = _Slow()
    manager._open = work  # type: ignore[method-assign]
    await _twice(manager.on_run_requested, _request(bus), work)
    assert manager._opening == {}
