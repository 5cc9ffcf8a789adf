"""A message redelivered while this process still handles it (a heartbeat came late: the
event loop was busy) is not handled a second time: a second agent loop would race the first
on one sandbox, a second open would destroy the sandbox being made as "half-made"."""

from __future__ import annotations

import asyncio
import time

from assay.bus import Bus, Delivery
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_sandbox_manager.handlers import SandboxService
from assay_schemas import Event, RunRequested
from assay_testing.events import run_requested, sandbox_ready


async def _until(predicate, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.1)


async def test_a_redelivery_while_the_first_is_handled_waits_and_settles_with_it(
    settings: Settings,
) -> None:
    quick = settings.model_copy(update={"ack_wait_s": 1.5})
    release = asyncio.Event()
    handled: list[int] = []

    async def busy(event: Event, delivery: Delivery) -> None:
        handled.append(delivery.attempt)
        time.sleep(2.5)  # the loop is busy past the ack wait: no heartbeat, a redelivery
        await release.wait()

    async with Bus(quick, service="test") as publisher:
        consumer = Bus(quick, service="consumer")
        consumer.consume(
            consumer.subjects.events, busy, durable="busy", max_deliver=5, max_workers=2
        )
        await consumer.start()
        js, stream = publisher.js, quick.stream
        try:
            await publisher.publish(sandbox_ready(run_requested()))

            async def redelivered() -> bool:
                info = await js.consumer_info(stream, "busy")
                return (info.num_redelivered or 0) >= 1

            await _until(redelivered)
            await asyncio.sleep(1.0)  # the redelivery reaches a free worker meanwhile
            assert handled == [1], "the redelivery ran the handler a second time"
            release.set()

            async def settled() -> bool:
                info = await js.consumer_info(stream, "busy")
                return info.num_ack_pending == 0 and info.num_pending == 0

            await _until(settled)
            await asyncio.sleep(quick.ack_wait_s + 0.5)  # a further redelivery would show
            assert handled == [1]
            assert consumer._handling == {}
        finally:
            await consumer.stop()


async def test_a_run_request_for_a_sandbox_open_here_opens_nothing(
    bus: Bus, settings: Settings
) -> None:
    manager = SandboxService(
        bus=bus, store=LocalBlobStore(settings.blob_dir), backends={}, instance="vm"
    )
    opened: list[str] = []

    async def record(event: RunRequested, _: Delivery) -> None:
        opened.append(event.run_id or "")

    manager._open = record  # type: ignore[method-assign]
    await manager.on_run_requested(run_requested(), Delivery(1, 1))
    manager._live["r1"] = (run_requested(), sandbox_ready(run_requested()))
    await manager.on_run_requested(run_requested(), Delivery(1, 2))
    assert opened == ["r1"]
