"""A message whose last delivery is lost (its consumer killed, or paused past the ack
wait) is given up and dead-lettered like one whose last attempt raised: JetStream's
max-deliveries advisory says so. The advisory is kept in a stream of its own, so one
published while no instance of the durable was up is handled by the next to start."""

from __future__ import annotations

import asyncio

import nats
from nats.js.api import AckPolicy, ConsumerConfig

from assay.bus import DEAD_DELIVERIES, DEAD_REASON, DEAD_SEQUENCE, Bus, Delivery
from assay.config import Settings
from assay_schemas import Event
from tests.backbone.test_bus import step, wait_for
from tests.frozen import FrozenInstance


async def test_a_last_delivery_lost_in_a_frozen_instance_is_given_up_by_another(
    settings: Settings,
) -> None:
    quick = settings.model_copy(update={"ack_wait_s": 1.5, "max_deliver": 2})
    given_up: list[tuple[str, Delivery, str]] = []
    handled: list[int] = []

    async def never_reached(event: Event, delivery: Delivery) -> None:
        handled.append(delivery.attempt)

    async def give_up(event: Event, delivery: Delivery, reason: str) -> None:
        given_up.append((event.event_id, delivery, reason))

    async with Bus(quick, service="test") as publisher:
        published = await publisher.publish(step("r1", 0))
        # The first instance takes both deliveries: the first raises, the last freezes it.
        frozen = FrozenInstance(
            quick, durable="work", subject=lambda b: b.subjects.events, freeze_at=2
        )
        async with frozen:
            await frozen.until_frozen()
            other = Bus(quick, service="other")
            other.consume(other.subjects.events, never_reached, durable="work", on_give_up=give_up)
            await other.start()
            try:
                await wait_for(lambda: bool(given_up), timeout=20.0)
                letters = await other.dead_letters("work")
            finally:
                await other.stop()
        # Thawed: its ack comes too late, and the advisory it heard is handled once.
        letters_after = await publisher.dead_letters("work")
    [(event_id, delivery, reason)] = given_up
    assert event_id == step("r1", 0).event_id
    assert (delivery.sequence, delivery.attempt) == (published.sequence, 2)
    assert reason == "last delivery lost: 2 deliveries"
    assert handled == [], "JetStream never delivers it again"
    [(_, headers)] = letters
    assert headers[DEAD_REASON] == reason
    assert (headers[DEAD_SEQUENCE], headers[DEAD_DELIVERIES]) == (str(published.sequence), "2")
    assert frozen.attempts == [1, 2] and frozen.finished == [2]
    assert frozen.given_up == [], "the instance that acked at last does not give up"
    assert len(letters_after) == 1, "dead-lettered once"


async def test_a_message_acked_in_time_has_no_advisory(settings: Settings) -> None:
    """A slow last delivery kept alive by its heartbeat is no lost one."""
    quick = settings.model_copy(update={"ack_wait_s": 1.5, "max_deliver": 1})
    given_up: list[str] = []
    done: list[int] = []

    async def slow(event: Event, delivery: Delivery) -> None:
        await asyncio.sleep(4.0)  # over twice the ack wait
        done.append(delivery.attempt)

    async def give_up(event: Event, delivery: Delivery, reason: str) -> None:
        given_up.append(reason)

    async with Bus(quick, service="test") as publisher:
        consumer = Bus(quick, service="consumer")
        consumer.consume(consumer.subjects.events, slow, durable="slow", on_give_up=give_up)
        await consumer.start()
        try:
            await publisher.publish(step("r1", 0))
            await wait_for(lambda: bool(done), timeout=15.0)
            await asyncio.sleep(2.0)
            letters = await consumer.dead_letters("slow")
        finally:
            await consumer.stop()
    assert done == [1] and given_up == [] and letters == []


async def test_a_last_delivery_lost_while_no_instance_was_up_is_given_up_by_the_next(
    settings: Settings,
) -> None:
    """The one instance of a durable dies holding the message's last delivery, and JetStream
    says so while nobody of that durable listens (the storm met it: a runner killed with
    a SandboxReady in hand, its run left running). The instance started after it gives the
    message up all the same: the advisory waited in the log for it."""
    quick = settings.model_copy(update={"ack_wait_s": 1.0, "max_deliver": 1})
    given_up: list[tuple[str, Delivery, str]] = []

    async def never_reached(event: Event, delivery: Delivery) -> None:
        raise AssertionError("JetStream never delivers it again")

    async def give_up(event: Event, delivery: Delivery, reason: str) -> None:
        given_up.append((event.event_id, delivery, reason))

    async with Bus(quick, service="test") as publisher:
        published = await publisher.publish(step("r1", 0))
        # The instance that dies: it takes the last delivery and is gone before its ack wait.
        doomed = await nats.connect(quick.nats_url)
        config = ConsumerConfig(
            durable_name="work",
            ack_policy=AckPolicy.EXPLICIT,
            max_deliver=1,
            ack_wait=quick.ack_wait_s,
            filter_subject=publisher.subjects.events,
        )
        pull = await doomed.jetstream().pull_subscribe(
            publisher.subjects.events, durable="work", stream=quick.stream, config=config
        )
        [taken] = await pull.fetch(1, timeout=5)
        assert taken.metadata.num_delivered == 1
        await doomed.close()
        await asyncio.sleep(3 * quick.ack_wait_s)  # the advisory is out: nobody heard it
        successor = Bus(quick, service="successor")
        successor.consume(
            successor.subjects.events, never_reached, durable="work", on_give_up=give_up
        )
        await successor.start()
        try:
            await wait_for(lambda: bool(given_up), timeout=20.0)
            letters = await successor.dead_letters("work")
        finally:
            await successor.stop()
    [(event_id, delivery, reason)] = given_up
    assert event_id == step("r1", 0).event_id
    assert (delivery.sequence, delivery.attempt) == (published.sequence, 1)
    assert reason == "last delivery lost: 1 deliveries"
    [(_, headers)] = letters
    assert (headers[DEAD_SEQUENCE], headers[DEAD_DELIVERIES]) == (str(published.sequence), "1")
