"""Batched deliveries (`batch_wait_s`, the aggregator's consumer): one handover per pull,
every message still parsed, handled and settled on its own, in log order — against a
real nats-server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from assay.bus import DEAD_REASON, BatchPull, Bus, Delivery, Refusal
from assay.config import Settings
from assay_schemas import AgentStepLogged, Event
from tests.backbone.test_bus import consuming, step, wait_for


def folder(
    settings: Settings,
    handle: Callable[[Event, Delivery], Awaitable[None]],
    on_refused: Callable[[Refusal], Awaitable[None]],
) -> Bus:
    """A consumer of the whole log as the aggregator consumes it (batched pulls), durable
    `folder`, not started."""
    consumer = Bus(settings, service="consumer")
    consumer.consume(
        consumer.subjects.events,
        handle,
        durable="folder",
        batch_size=64,
        batch_wait_s=0.1,
        on_refused=on_refused,
    )
    return consumer


async def _pending_once_settled(bus: Bus, durable: str) -> tuple[int, int]:
    """The consumer's (pending, unacked) counts, polled for up to 5 s until both are 0:
    acks reach the server's counts asynchronously."""
    for _ in range(50):
        info = await bus.js.consumer_info(bus.stream.name, durable)
        counts = info.num_pending or 0, info.num_ack_pending or 0
        if counts == (0, 0):
            break
        await asyncio.sleep(0.1)
    return counts


async def test_a_batch_with_garbage_and_a_failing_event_settles_each_on_its_own(
    settings: Settings,
) -> None:
    """Garbage in the middle of a batch is dead-lettered and reported; the event whose
    handler fails is retried alone; every other event is handled once, in log order."""
    seen: list[tuple[int, int]] = []
    refused: list[Refusal] = []

    async def handle(event: Event, delivery: Delivery) -> None:
        assert isinstance(event, AgentStepLogged)
        seen.append((event.step, delivery.attempt))
        if event.step == 3 and delivery.attempt == 1:
            raise RuntimeError("transient")

    async def on_refused(refusal: Refusal) -> None:
        refused.append(refusal)

    async with Bus(settings, service="test") as publisher:
        # Everything is in the log before the consumer starts: its first pulls are full.
        subject = publisher.subjects.event("AgentStepLogged", "c1", "r1")
        for n in range(3):
            await publisher.publish(step("r1", n))
        await publisher.broker.publish(b"\xff not json", subject, stream=settings.stream)
        for n in range(3, 8):
            await publisher.publish(step("r1", n))
        consumer = folder(settings, handle, on_refused)
        await consumer.start()
        try:
            await wait_for(lambda: (3, 2) in seen, timeout=15.0)
            await wait_for(lambda: len(refused) == 1, timeout=15.0)
            first_pass = [s for s, attempt in seen if attempt == 1]
            assert first_pass == list(range(8)), "one pass, in log order, garbage skipped"
            assert sorted(seen) == sorted([(n, 1) for n in range(8)] + [(3, 2)])
            assert "not JSON" in refused[0].reason
            dead = await consumer.dead_letters("folder")
            assert len(dead) == 1 and "not JSON" in dead[0][1][DEAD_REASON]
            assert await _pending_once_settled(consumer, "folder") == (0, 0)
        finally:
            await consumer.stop()


async def test_the_rest_of_a_slow_batch_is_kept_not_redelivered(settings: Settings) -> None:
    """The batch's later messages wait while an early one is slow: the keep-alive covers
    them, so none comes back while its turn has not come."""
    quick = settings.model_copy(update={"ack_wait_s": 1.5})
    seen: list[tuple[int, int]] = []

    async def slow_first(event: Event, delivery: Delivery) -> None:
        assert isinstance(event, AgentStepLogged)
        seen.append((event.step, delivery.attempt))
        if event.step == 0:
            await asyncio.sleep(4.0)  # over twice the ack wait

    async with Bus(quick, service="test") as publisher:
        for n in range(4):
            await publisher.publish(step("r1", n))
        async with consuming(
            quick, slow_first, durable="slowbatch", batch_size=16, batch_wait_s=0.2, max_deliver=5
        ):
            await wait_for(lambda: len(seen) >= 4, timeout=15.0)
            await asyncio.sleep(2.0)
            assert seen == [(0, 1), (1, 1), (2, 1), (3, 1)]


async def test_events_published_while_it_waits_arrive_within_the_wait(settings: Settings) -> None:
    """A quiet log: a single event is handed over within about the batch wait."""
    seen: list[float] = []
    loop = asyncio.get_running_loop()

    async def handle(event: Event, delivery: Delivery) -> None:
        seen.append(loop.time())

    async with (
        Bus(settings, service="test") as publisher,
        consuming(settings, handle, durable="quiet", batch_size=256, batch_wait_s=0.1),
    ):
        await asyncio.sleep(0.5)
        sent = loop.time()
        await publisher.publish(step("r2", 0))
        await wait_for(lambda: bool(seen), timeout=15.0)
        assert seen[0] - sent < 1.0


async def test_a_steady_log_is_handled_whole_and_at_once(settings: Settings) -> None:
    """Events published steadily while the consumer pulls (its pulls keep timing out
    between events) are each handled once and acked at once: none is left for the ack
    wait's redelivery (faststream's batch mode left 5-10% so, see `assay.bus._pulls`)."""
    seen: list[int] = []

    async def handle(event: Event, delivery: Delivery) -> None:
        assert isinstance(event, AgentStepLogged)
        seen.append(event.step)

    async with (
        Bus(settings, service="test") as publisher,
        consuming(settings, handle, durable="steady", batch_size=256, batch_wait_s=0.1) as consumer,
    ):
        for n in range(600):
            await publisher.publish(step("r3", n))
            await asyncio.sleep(0.003)
        await wait_for(lambda: len(seen) >= 600, timeout=10.0)
        assert seen == list(range(600))
        assert await _pending_once_settled(consumer, "steady") == (0, 0)


async def _steady(settings: Settings, durable: str, gather_s: float) -> tuple[int, float]:
    """300 events published one at a time to a consumer that keeps up: (its batches, the
    seconds they took), every event handled once, in order."""
    seen: list[int] = []
    run = f"r-{durable}"

    async def handle(event: Event, delivery: Delivery) -> None:
        assert isinstance(event, AgentStepLogged)
        if event.run_id == run:  # the log holds the other call's events too
            seen.append(event.step)

    async with Bus(settings, service="test") as publisher:
        consumer = Bus(settings, service="consumer")
        pull = consumer.consume(
            consumer.subjects.events,
            handle,
            durable=durable,
            batch_size=256,
            batch_wait_s=0.1,
            batch_gather_s=gather_s,
        )
        assert isinstance(pull, BatchPull)
        await consumer.start()
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            for n in range(300):
                await publisher.publish(step(run, n))
                await asyncio.sleep(0.002)
            await wait_for(lambda: len(seen) >= 300, timeout=15.0)
            took = loop.time() - started
            assert seen == list(range(300))
            assert await _pending_once_settled(consumer, durable) == (0, 0)
            return pull.batches, took
        finally:
            await consumer.stop()


async def test_a_busy_log_is_pulled_once_per_gathering_not_once_per_event(
    settings: Settings,
) -> None:
    """After a pull that drained the log the next waits for events to gather: a steady
    log costs at most one pull per interval (each pull is a request and a "no messages"
    answer through nats-server), where pulling again at once took one per event or two."""
    gathered, took = await _steady(settings, "gathered", 0.05)
    assert gathered <= took / 0.05 + 2, (gathered, took)
    eager, _ = await _steady(settings, "eager", 0.0)
    assert gathered * 3 < eager, (gathered, eager)


def test_batches_need_one_worker(settings: Settings) -> None:
    bus = Bus(settings, service="consumer")

    async def handle(event: Event, delivery: Delivery) -> None:
        return None

    with pytest.raises(ValueError, match="one worker"):
        bus.consume(bus.subjects.events, handle, durable="x", max_workers=4, batch_wait_s=0.1)
