"""The log: dedupe, redelivery, dead letters, replay — against a real nats-server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from nats.aio.msg import Msg
from nats.errors import NotJSMessageError
from nats.js.errors import APIError

from assay.bus import DEAD_REASON, Bus, Delivery, Subjects, Unchanged, read_raw
from assay.bus._replay import _position
from assay.config import Settings
from assay.embedded import NatsServer, find_free_port
from assay_schemas import (
    AgentStepLogged,
    Event,
    LogChanged,
    Producer,
    RunFailed,
    RunRequested,
)

PRODUCER = Producer(service="test", version="0")


def step(run: str, n: int) -> AgentStepLogged:
    return AgentStepLogged(
        event_id=AgentStepLogged.id_for(run, n),
        campaign_id="c1",
        run_id=run,
        step=n,
        producer=PRODUCER,
    )


async def wait_for(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_same_event_published_twice_is_stored_once(bus: Bus) -> None:
    first = await bus.publish(step("r1", 0))
    second = await bus.publish(step("r1", 0))
    assert not first.duplicate and second.duplicate
    assert second.sequence == first.sequence
    events = [e async for e in bus.replay()]
    assert len(events) == 1


async def test_handler_that_raises_is_redelivered_then_dead_lettered(settings: Settings) -> None:
    attempts: list[int] = []

    async def always_fails(event: Event, delivery: Delivery) -> None:
        attempts.append(delivery.attempt)
        raise RuntimeError("disk on fire")

    async with (
        Bus(settings, service="test") as publisher,
        consuming(settings, always_fails, durable="flaky", max_deliver=3) as consumer,
    ):
        await publisher.publish(step("r1", 0))
        await wait_for(lambda: len(attempts) >= 3)
        dead = await dead_letters(consumer, "flaky", 1)
        assert attempts == [1, 2, 3]
        assert len(dead) == 1
        assert "RuntimeError: disk on fire" in dead[0][1][DEAD_REASON]
        await asyncio.sleep(0.5)
        assert attempts == [1, 2, 3], "a dead-lettered message must not come back"


@contextlib.asynccontextmanager
async def consuming(
    settings: Settings,
    handle: Callable[[Event, Delivery], Awaitable[None]],
    *,
    durable: str,
    subject: str | None = None,
    **options: Any,
) -> AsyncIterator[Bus]:
    """A started consumer (durable `durable`) of `subject`, or of the whole log; stopped at
    exit."""
    consumer = Bus(settings, service="consumer")
    consumer.consume(subject or consumer.subjects.events, handle, durable=durable, **options)
    await consumer.start()
    try:
        yield consumer
    finally:
        await consumer.stop()


@contextlib.asynccontextmanager
async def step_consumer(settings: Settings) -> AsyncIterator[tuple[Bus, list[int]]]:
    """A started consumer of the run steps (durable `steps`) and the steps it handled."""
    seen: list[int] = []

    async def handle(event: Event, delivery: Delivery) -> None:
        assert isinstance(event, AgentStepLogged)
        seen.append(event.step)

    subject = Subjects(prefix=settings.subject_prefix).event("AgentStepLogged")
    async with consuming(
        settings, handle, durable="steps", subject=subject, event_type=AgentStepLogged
    ) as consumer:
        yield consumer, seen


async def dead_letters(consumer: Bus, durable: str, n: int) -> list[tuple[bytes, dict[str, str]]]:
    """The consumer's dead letters once there are `n` of them (or after ten seconds)."""
    for _ in range(100):
        dead = await consumer.dead_letters(durable)
        if len(dead) == n:
            break
        await asyncio.sleep(0.1)
    return dead


async def test_garbage_and_invalid_events_are_dead_lettered_and_consumer_keeps_serving(
    settings: Settings,
) -> None:
    async with step_consumer(settings) as (consumer, seen):
        subject = consumer.subjects.event("AgentStepLogged", "c1", "r1")
        await consumer.broker.publish(b"\xff not json", subject, stream=settings.stream)
        await consumer.broker.publish(
            b'{"event_type": "AgentStepLogged", "step": -1}', subject, stream=settings.stream
        )
        await consumer.publish(step("r1", 7))
        await wait_for(lambda: seen == [7])
        dead = await dead_letters(consumer, "steps", 2)
        reasons = sorted(h[DEAD_REASON] for _, h in dead)
        assert len(reasons) == 2
        assert any("not JSON" in r for r in reasons)
        assert any("AgentStepLogged event" in r and "invalid" in r for r in reasons)


async def test_replay_returns_every_event_in_order_as_typed_models(bus: Bus) -> None:
    for run in ("r1", "r2"):
        for n in range(5):
            await bus.publish(step(run, n))
    logged = [e async for e in bus.replay()]
    assert [e.sequence for e in logged] == list(range(1, 11))
    assert all(isinstance(e.event, AgentStepLogged) for e in logged)
    assert [(e.event.run_id, e.event.step) for e in logged] == [  # type: ignore[attr-defined]
        (r, n) for r in ("r1", "r2") for n in range(5)
    ]
    from_seq = [e.sequence async for e in bus.replay(start=8)]
    assert from_seq == [8, 9, 10]
    only_r2 = await bus.run_events("c1", "r2")
    assert [e.step for e in only_r2] == list(range(5))  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.KB.reader.1.42.7.1733580000000000000.3",
        "$JS.ACK._.ACCOUNTHASH.KB.reader.2.42.7.1733580000000000000.0",
        "$JS.ACK.hub.ACCOUNTHASH.KB.reader.2.42.7.1733580000000000000.5.token",
    ],
)
def test_a_deliverys_position_reads_as_nats_py_reads_it(reply: str) -> None:
    """The reader's own parse of a delivery's reply subject (both of JetStream's layouts)
    gives what nats-py's `Msg.metadata` gives, and refuses what it refuses."""
    meta = Msg(None, reply=reply).metadata  # type: ignore[arg-type]
    assert _position(reply) == (meta.sequence.stream, meta.num_pending)


@pytest.mark.parametrize(
    "reply", ["", "_INBOX.abc", "$JS.ACK.KB.reader.1.42", "$JS.NAK.a.b.c.d.e.f.g"]
)
def test_a_reply_that_is_no_jetstream_delivery_is_refused_as_nats_py_refuses_it(
    reply: str,
) -> None:
    with pytest.raises(NotJSMessageError):
        _ = Msg(None, reply=reply).metadata  # type: ignore[arg-type]
    with pytest.raises(NotJSMessageError):
        _position(reply)


async def test_a_real_deliverys_position_is_its_sequence(bus: Bus) -> None:
    for n in range(3):
        await bus.publish(step("r1", n))
    raws = [r async for r in read_raw(bus.js, bus.stream.name, subject=bus.subjects.events)]
    assert [r.sequence for r in raws] == [1, 2, 3]
    got = await bus.js.subscribe(bus.subjects.events, stream=bus.stream.name, ordered_consumer=True)
    try:
        msg = await got.next_msg(timeout=5)
        assert _position(msg.reply) == (msg.metadata.sequence.stream, msg.metadata.num_pending)
    finally:
        await got.unsubscribe()


async def test_run_events_of_some_types_leave_the_others_undecoded(bus: Bus) -> None:
    for n in range(3):
        await bus.publish(step("r1", n))
    failed = RunFailed(
        event_id=RunFailed.id_for("r1", "agent"),
        campaign_id="c1",
        run_id="r1",
        stage="agent",
        error="model gone",
        infrastructure=True,
        producer=PRODUCER,
    )
    await bus.publish(failed)
    # Not an event at all, on a step's subject: a reader of other types never parses it.
    await bus.js.publish(bus.subjects.event("AgentStepLogged", "c1", "r1"), b"{not json")
    assert await bus.run_events("c1", "r1", types=(RunFailed,)) == [failed]
    assert await bus.run_events("c1", "r1", types=(RunRequested,)) == []
    every = await bus.run_events("c1", "r1")
    assert [type(e) for e in every] == [AgentStepLogged] * 3 + [RunFailed]


async def test_lookups_then_a_consumer_read_the_same_messages(bus: Bus) -> None:
    """Direct lookups first, the consumer for the rest: every count of each gives the
    same messages in the same order, and an undecodable one is skipped either way."""
    for run, n in (("r1", 0), ("r2", 0), ("r1", 1), ("r1", 2), ("r2", 1), ("r1", 3)):
        await bus.publish(step(run, n))
    await bus.js.publish(bus.subjects.event("AgentStepLogged", "c1", "r1"), b"{not json")
    await bus.publish(step("r1", 4))
    subject = bus.subjects.event("*", "c1", "r1")
    plain = [(e.sequence, e.event) async for e in bus.replay(subject=subject)]
    assert [e.step for _, e in plain] == [0, 1, 2, 3, 4]  # type: ignore[attr-defined]
    for lookups in (1, 2, 5, 6, 7, 20):
        looked = [(e.sequence, e.event) async for e in bus.replay(subject=subject, lookups=lookups)]
        assert looked == plain, lookups
        later = [e.sequence async for e in bus.replay(start=5, subject=subject, lookups=lookups)]
        assert later == [s for s, _ in plain if s >= 5]
    none = bus.subjects.event("*", "c1", "nobody")
    assert [e async for e in bus.replay(subject=none, lookups=3)] == []
    assert [e.step for e in await bus.run_events("c1", "r2")] == [0, 1]  # type: ignore[attr-defined]
    typed = await bus.run_events("c1", "r1", types=(RunFailed, AgentStepLogged))
    assert typed == [e for _, e in plain]
    # An event the reader holds already (its delivery) is taken as it is, not decoded again.
    held = {plain[1][0]: plain[1][1]}
    again = await bus.run_events("c1", "r1", known=held)
    assert again == [e for _, e in plain] and again[1] is plain[1][1]


async def test_first_event_skips_what_is_no_valid_event_of_its_type(bus: Bus) -> None:
    """The first valid event of the type on the subject, as a fold's first one."""
    subject = bus.subjects.event("RunFailed", "c1", "r1")
    assert await bus.first_event(subject, RunFailed) is None
    await bus.js.publish(subject, b"{not json")
    await bus.js.publish(subject, step("r1", 0).model_dump_json().encode())  # wrong subject
    assert await bus.first_event(subject, RunFailed) is None
    failed = [
        RunFailed(
            event_id=RunFailed.id_for("r1", stage),
            campaign_id="c1",
            run_id="r1",
            stage=stage,
            error="x",
            infrastructure=True,
            producer=PRODUCER,
        )
        for stage in ("sandbox", "agent")
    ]
    for event in failed:
        await bus.publish(event)
    assert await bus.first_event(subject, RunFailed) == failed[0]
    assert await bus.first_event(subject, RunRequested) is None


async def test_a_bus_that_read_a_first_event_past_its_lookup_stops_at_once(
    settings: Settings,
) -> None:
    """`first_event` returns from inside its reader once past the direct lookup (an
    ordered consumer): the reader left open kept that consumer subscribed, and the bus's
    stop then waited 30 s for it."""
    subject = Bus(settings, service="test").subjects.event("RunFailed", "c1", "r1")
    async with Bus(settings, service="test") as bus:
        await bus.js.publish(subject, b"{not json")  # read by the lookup, skipped
        first, second = _failed("r1", "sandbox"), _failed("r1", "agent")
        await bus.publish(first)  # read by the consumer
        await bus.publish(second)  # left unread: the reader returns early
        reader = Bus(settings, service="reader")
        await reader.start()
        assert await reader.first_event(subject, RunFailed) == first
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(reader.stop(), 10)
        assert asyncio.get_running_loop().time() - started < 5


def _failed(run: str, stage: str) -> RunFailed:
    return RunFailed(
        event_id=RunFailed.id_for(run, stage),
        campaign_id="c1",
        run_id=run,
        stage=stage,
        error="x",
        infrastructure=True,
        producer=PRODUCER,
    )


async def test_a_publish_on_condition_is_refused_once_its_subject_moved(bus: Bus) -> None:
    """`Unchanged`: stored only while the other subject's last message is the one read; a
    refusal stores nothing and does not use up the event's id; any message counts as a
    move, a junk one too (the condition is on the log, not on what parses)."""
    failed = bus.subjects.event("RunFailed", "c1", "r1")
    assert await bus.last_sequence(failed) == 0
    first = await bus.publish(step("r1", 0), unchanged=Unchanged(failed, 0))
    await bus.publish(_failed("r1", "agent"))
    moved = await bus.last_sequence(failed)
    assert moved == first.sequence + 1

    with pytest.raises(LogChanged, match="changed since it was read at sequence 0"):
        await bus.publish(step("r1", 1), unchanged=Unchanged(failed, 0))
    again = await bus.publish(step("r1", 1), unchanged=Unchanged(failed, moved))
    assert not again.duplicate, "the refused publish did not use up the event id"

    await bus.js.publish(failed, b"{not json")
    with pytest.raises(LogChanged):
        await bus.publish(step("r1", 2), unchanged=Unchanged(failed, moved))
    steps = [e.event.step async for e in bus.replay() if isinstance(e.event, AgentStepLogged)]
    assert steps == [0, 1]


async def test_a_handler_longer_than_the_ack_wait_keeps_its_message(settings: Settings) -> None:
    """The heartbeat tells JetStream the handler is at work: no redelivery meanwhile."""
    quick = settings.model_copy(update={"ack_wait_s": 1.5})
    attempts: list[int] = []

    async def slow(event: Event, delivery: Delivery) -> None:
        attempts.append(delivery.attempt)
        await asyncio.sleep(4.0)  # over twice the ack wait

    async with (
        Bus(quick, service="test") as publisher,
        consuming(quick, slow, durable="slow", max_deliver=5, max_workers=2),
    ):
        await publisher.publish(step("r1", 0))
        await wait_for(lambda: len(attempts) >= 1)
        await asyncio.sleep(5.0)
        assert attempts == [1]


async def test_replay_of_an_empty_filter_ends(bus: Bus) -> None:
    assert [e async for e in bus.replay(subject=bus.subjects.event("RunFailed"))] == []


async def test_stream_refuses_delete_and_purge(bus: Bus) -> None:
    await bus.publish(step("r1", 0))
    info = await bus.js.stream_info(bus.settings.stream)
    assert info.config.deny_delete and info.config.deny_purge
    with pytest.raises(APIError, match="purge not permitted"):
        await bus.js.purge_stream(bus.settings.stream)
    with pytest.raises(APIError, match="delete"):
        await bus.js.delete_msg(bus.settings.stream, 1)
    assert (await bus.js.stream_info(bus.settings.stream)).state.messages == 1


async def test_a_consumer_started_while_the_server_is_down_waits_it_out(
    settings: Settings, tmp_path: Path
) -> None:
    """A service connected, then the server lost before its consumers were made (a node
    killed while a judge started, in the cluster fault test): making them waits for the
    server, as the connection does, instead of ending the service on the first timeout."""
    server = NatsServer(tmp_path / "nats", port=find_free_port()).start()
    own = settings.model_copy(update={"nats_url": server.url})
    seen: list[int] = []

    async def handle(event: Event, delivery: Delivery) -> None:
        assert isinstance(event, AgentStepLogged)
        seen.append(event.step)

    consumer = Bus(own, service="consumer")
    consumer.consume(consumer.subjects.events, handle, durable="late")
    try:
        await consumer.connect()
        server.kill()
        starting = asyncio.create_task(consumer.start())
        await asyncio.sleep(3.0)
        assert not starting.done(), "the consumer gave up while the server was down"
        server.start()
        await asyncio.wait_for(starting, 60)
        async with Bus(own, service="test") as publisher:
            await publisher.publish(step("r1", 0))
        await wait_for(lambda: seen == [0])
    finally:
        await consumer.stop()
        server.stop()
