"""Consumers with workers (`WorkerPull`, every consumer but the aggregator's): each message
handled in a task of its own, at most `max_workers` at a time, settled on its own — against
a real nats-server, with what the server's consumer info says rather than timings."""

from __future__ import annotations

import asyncio

from nats.js.api import ConsumerInfo

from assay.bus import DEAD_REASON, Bus, Delivery, WorkerPull, waiting_aside
from assay.config import Settings
from assay_schemas import AgentStepLogged, Event
from tests.backbone.test_bus import consuming, dead_letters, step, wait_for


async def _info(bus: Bus, durable: str) -> ConsumerInfo:
    return await bus.js.consumer_info(bus.stream.name, durable)


async def _settled(bus: Bus, durable: str) -> ConsumerInfo:
    """The consumer's info once nothing is pending or unacked (polled for up to 10 s:
    acks reach the server's counts asynchronously)."""
    for _ in range(100):
        info = await _info(bus, durable)
        if not info.num_pending and not info.num_ack_pending:
            break
        await asyncio.sleep(0.1)
    return info


async def test_no_more_than_max_workers_are_handled_or_fetched_at_once(
    settings: Settings,
) -> None:
    release = asyncio.Event()
    at_work = 0
    most = 0
    done: list[int] = []

    async def busy(event: Event, delivery: Delivery) -> None:
        nonlocal at_work, most
        assert isinstance(event, AgentStepLogged)
        at_work += 1
        most = max(most, at_work)
        await release.wait()
        at_work -= 1
        done.append(event.step)

    async with (
        Bus(settings, service="test") as publisher,
        consuming(settings, busy, durable="three", max_workers=3) as consumer,
    ):
        for n in range(10):
            await publisher.publish(step("r1", n))
        await wait_for(lambda: at_work == 3)
        await asyncio.sleep(0.5)  # a fourth worker, or a fourth message fetched, would show
        info = await _info(consumer, "three")
        assert (at_work, most) == (3, 3)
        # Fetched only for free workers: the rest wait in the log, not in this process.
        assert info.num_ack_pending == 3
        assert info.num_pending == 7
        release.set()
        await wait_for(lambda: len(done) == 10)
        info = await _settled(consumer, "three")
        assert sorted(done) == list(range(10))
        assert most == 3
        assert (info.num_pending, info.num_ack_pending, info.num_redelivered) == (0, 0, 0)


async def test_a_slow_event_loop_never_puts_more_than_the_batch_in_hand(
    settings: Settings,
) -> None:
    """The event loop turns slowly (CPU work beside the consumer, a busy runner) while a
    pull's messages come in: what the consumer holds unsettled, on the server's own count,
    is still its four workers' worth, and each is handled once. nats-py's fetch read its
    batch one message per turn against its own deadline, returned what it had read when
    the deadline passed, and its next fetch handed out the rest on top of what it asked
    for (a CI run: a runner meant to admit 64 submissions at once held all 100)."""
    import time

    release = asyncio.Event()
    started: list[int] = []
    slow = True

    async def held(event: Event, delivery: Delivery) -> None:
        assert isinstance(event, AgentStepLogged)
        started.append(event.step)
        await release.wait()  # nothing settles, so no ack races the server's count

    async def turn_slowly() -> None:
        while slow:
            await asyncio.sleep(0)
            time.sleep(0.3)  # each turn of the loop a third of the pull's 1 s wait

    async with Bus(settings, service="test") as publisher:
        for n in range(20):
            await publisher.publish(step("r1", n))
        # Slow from before the consumer's start (which then takes seconds), so that its
        # first pull is read slowly.
        slowing = asyncio.create_task(turn_slowly())
        async with consuming(settings, held, durable="slow", max_workers=4) as consumer:
            await asyncio.sleep(6)
            slow = False
            await slowing
            await asyncio.sleep(1.5)
            info = await _info(consumer, "slow")
            assert (info.num_ack_pending, sorted(started)) == (4, [0, 1, 2, 3])
            release.set()
            await wait_for(lambda: len(started) >= 20, timeout=30)
            info = await _settled(consumer, "slow")
    assert sorted(started) == list(range(20))
    assert (info.num_pending, info.num_ack_pending) == (0, 0)


async def test_a_failing_handler_is_retried_and_the_consumer_goes_on(settings: Settings) -> None:
    attempts: dict[int, list[int]] = {}

    async def flaky(event: Event, delivery: Delivery) -> None:
        assert isinstance(event, AgentStepLogged)
        attempts.setdefault(event.step, []).append(delivery.attempt)
        if event.step == 0 and delivery.attempt == 1:
            raise RuntimeError("first try fails")

    async with (
        Bus(settings, service="test") as publisher,
        consuming(settings, flaky, durable="flaky", max_workers=4, max_deliver=3) as consumer,
    ):
        await publisher.publish(step("r1", 0))
        await publisher.publish(step("r1", 1))
        await wait_for(lambda: attempts.get(0) == [1, 2] and attempts.get(1) == [1])
        await publisher.publish(step("r1", 2))  # after the failure: still consumed
        await wait_for(lambda: attempts.get(2) == [1])
        info = await _settled(consumer, "flaky")
        assert (info.num_pending, info.num_ack_pending) == (0, 0)
        assert await consumer.dead_letters("flaky") == []
        assert attempts == {0: [1, 2], 1: [1], 2: [1]}


async def test_poison_messages_are_dead_lettered_and_the_consumer_goes_on(
    settings: Settings,
) -> None:
    handled: list[int] = []

    async def handle(event: Event, delivery: Delivery) -> None:
        assert isinstance(event, AgentStepLogged)
        if event.run_id == "poison":
            raise ValueError("this event always fails")
        handled.append(event.step)

    async with (
        Bus(settings, service="test") as publisher,
        consuming(settings, handle, durable="poisoned", max_workers=4, max_deliver=2) as consumer,
    ):
        subject = publisher.subjects.of(step("r1", 0))
        await publisher.js.publish(subject, b"\xff not json", stream=publisher.stream.name)
        await publisher.publish(step("poison", 0))
        for n in range(5):
            await publisher.publish(step("r1", n))
        dead = await dead_letters(consumer, "poisoned", 2)
        await wait_for(lambda: len(handled) == 5)
        info = await _settled(consumer, "poisoned")
        assert sorted(handled) == list(range(5))
        reasons = sorted(headers[DEAD_REASON] for _, headers in dead)
        assert len(reasons) == 2
        assert any("ValueError: this event always fails" in r for r in reasons)
        assert (info.num_pending, info.num_ack_pending) == (0, 0)


async def test_acks_reach_the_server_and_nothing_comes_back(settings: Settings) -> None:
    quick = settings.model_copy(update={"ack_wait_s": 1.5})
    seen: list[int] = []

    async def handle(event: Event, delivery: Delivery) -> None:
        seen.append(delivery.attempt)

    async with (
        Bus(quick, service="test") as publisher,
        consuming(quick, handle, durable="acked", max_workers=16) as consumer,
    ):
        for n in range(200):
            await publisher.publish(step("r1", n))
        await wait_for(lambda: len(seen) >= 200)
        info = await _settled(consumer, "acked")
        assert (info.num_pending, info.num_ack_pending) == (0, 0)
        assert info.ack_floor is not None and info.ack_floor.stream_seq == 200
        await asyncio.sleep(quick.ack_wait_s + 1.0)  # an ack lost would be redelivered by now
        info = await _info(consumer, "acked")
        assert (info.num_redelivered, info.num_ack_pending) == (0, 0)
        assert seen == [1] * 200


async def test_messages_waiting_for_a_worker_are_kept_alive_and_handled_in_order(
    settings: Settings,
) -> None:
    """`batch_size` above `max_workers`: the messages fetched ahead wait their turn in log
    order, and the keep-alive covers them too (they wait past the ack wait)."""
    quick = settings.model_copy(update={"ack_wait_s": 1.5})
    handled: list[tuple[int, int]] = []

    async def slow(event: Event, delivery: Delivery) -> None:
        assert isinstance(event, AgentStepLogged)
        await asyncio.sleep(0.8)
        handled.append((event.step, delivery.attempt))

    consumer = Bus(quick, service="consumer")
    pull = consumer.consume(
        consumer.subjects.events, slow, durable="ahead", max_workers=1, batch_size=4
    )
    assert isinstance(pull, WorkerPull)
    async with Bus(quick, service="test") as publisher:
        for n in range(4):
            await publisher.publish(step("r1", n))
        await consumer.start()
        try:
            await wait_for(lambda: len(handled) == 4, timeout=20)
            info = await _settled(consumer, "ahead")
        finally:
            await consumer.stop()
    assert handled == [(0, 1), (1, 1), (2, 1), (3, 1)]  # 3.2 s in all: past the ack wait
    assert (info.num_redelivered, info.num_ack_pending) == (0, 0)


async def test_handlers_waiting_on_later_messages_give_their_workers_to_them(
    settings: Settings,
) -> None:
    """Two workers, and the first two messages each wait for a later one to be handled (a
    control run waiting for its look-alike's run to end): waiting aside, they let those
    in; holding their workers, nothing would ever be handled."""
    handled: dict[int, asyncio.Event] = {n: asyncio.Event() for n in range(4)}
    at_work = 0
    most = 0
    order: list[int] = []

    async def waits_for_a_later_one(event: Event, delivery: Delivery) -> None:
        nonlocal at_work, most
        assert isinstance(event, AgentStepLogged)
        at_work += 1
        most = max(most, at_work)
        if event.step < 2:
            at_work -= 1
            async with waiting_aside():
                await handled[event.step + 2].wait()
                async with waiting_aside():  # nested: gives nothing twice
                    pass
            at_work += 1
            most = max(most, at_work)
        await asyncio.sleep(0.05)
        at_work -= 1
        order.append(event.step)
        handled[event.step].set()

    async with (
        Bus(settings, service="test") as publisher,
        consuming(settings, waits_for_a_later_one, durable="aside", max_workers=2) as consumer,
    ):
        for n in range(4):
            await publisher.publish(step("r1", n))
        await wait_for(lambda: len(order) == 4)
        info = await _settled(consumer, "aside")
        assert order[:2] == [2, 3] and sorted(order) == [0, 1, 2, 3]
        assert most <= 2  # never more than the workers at work at once
        assert (info.num_pending, info.num_ack_pending, info.num_redelivered) == (0, 0, 0)


async def test_waiting_aside_outside_a_worker_does_nothing() -> None:
    async with waiting_aside():
        await asyncio.sleep(0)


async def test_a_consumer_stopped_with_a_handler_aside_leaves_its_workers_whole(
    settings: Settings,
) -> None:
    """Stopping the consumer cancels a handler waiting aside while the only worker is
    busy: afterwards no slot is lost or given twice, and nothing counts as aside."""
    release = asyncio.Event()
    aside = asyncio.Event()

    async def waits(event: Event, delivery: Delivery) -> None:
        assert isinstance(event, AgentStepLogged)
        if event.step == 0:
            async with waiting_aside():
                aside.set()
                await asyncio.Event().wait()  # never: cancelled by the stop
        await release.wait()  # the other holds the only worker until the end

    async with Bus(settings, service="test") as publisher:
        async with consuming(settings, waits, durable="stop-aside", max_workers=1) as bus:
            [pull] = [p for p in bus._pulls if isinstance(p, WorkerPull)]
            await publisher.publish(step("r1", 0))
            await publisher.publish(step("r1", 1))
            await asyncio.wait_for(aside.wait(), 10)
            await wait_for(lambda: pull.in_hand == 2)  # the second took the freed worker
            assert pull._aside == 1
        assert pull._slots is not None
        assert (pull._aside, pull._slots._value, pull.in_hand) == (0, 1, 0)
