"""Core-NATS request serving (sandbox commands): replies, a bound on concurrency, failures."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import nats
import pytest

from assay.bus import Bus, RequestServer
from assay.config import Settings
from assay_schemas import NoResponders, RequestUnanswered

pytestmark = pytest.mark.timeout(30)


async def test_requests_are_answered_at_most_max_workers_at_a_time(
    settings: Settings, bus: Bus
) -> None:
    running, peak = 0, 0

    async def echo(body: bytes) -> bytes:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        return body.upper()

    server = Bus(settings, service="server")
    server.serve_requests(RequestServer("rpc.echo", echo, max_workers=3))
    await server.start()
    try:
        replies = await asyncio.gather(
            *(bus.request("rpc.echo", f"m{i}".encode(), timeout=5) for i in range(8))
        )
    finally:
        await server.stop()
    assert replies == [f"M{i}".encode() for i in range(8)]
    assert peak == 3


async def test_a_failing_handler_leaves_its_requester_waiting_and_keeps_serving(
    settings: Settings, bus: Bus
) -> None:
    async def picky(body: bytes) -> bytes:
        if body == b"bad":
            raise RuntimeError("no")
        return b"ok"

    server = Bus(settings, service="server")
    server.serve_requests(RequestServer("rpc.picky", picky))
    await server.start()
    try:
        with pytest.raises(RequestUnanswered):  # a BusError
            await bus.request("rpc.picky", b"bad", timeout=0.5)
        assert await bus.request("rpc.picky", b"good", timeout=5) == b"ok"
    finally:
        await server.stop()
    with pytest.raises(NoResponders):  # a BusError
        await bus.request("rpc.picky", b"good", timeout=5)


async def test_an_unmetered_request_is_answered_while_every_slot_is_busy(
    settings: Settings, bus: Bus
) -> None:
    """A drive's lease renewal must not wait behind long sandbox commands: with every
    slot taken and more requests waiting for one, an unmetered request is answered.

    The slots are counted where they are held, in the handler: a requester's own timeout
    says nothing about them (a stalled event loop on a loaded machine once timed the long
    requests out before the claim's reply was read)."""
    release = asyncio.Event()
    in_slots = 0
    seen_by_claim: list[int] = []

    async def handler(body: bytes) -> bytes:
        nonlocal in_slots
        if body == b"claim":
            seen_by_claim.append(in_slots)
            return body
        in_slots += 1
        await release.wait()
        return body

    server = Bus(settings, service="server")
    server.serve_requests(
        RequestServer("rpc.mixed", handler, max_workers=2, unmetered=lambda b: b == b"claim")
    )
    await server.start()
    try:
        long = [
            asyncio.create_task(bus.request("rpc.mixed", b"long", timeout=25)) for _ in range(5)
        ]
        for _ in range(100):  # two run, three wait for a slot
            if in_slots == 2:
                break
            await asyncio.sleep(0.05)
        assert await bus.request("rpc.mixed", b"claim", timeout=10) == b"claim"
        assert seen_by_claim == [2]  # answered while both slots were held
        assert in_slots == 2  # and the three waiting had not got one
        release.set()
        assert await asyncio.gather(*long) == [b"long"] * 5
    finally:
        release.set()
        await server.stop()


async def test_a_request_server_is_subscribed_when_its_start_returns(
    settings: Settings, bus: Bus
) -> None:
    """`start` promises that requests reach the server once it returns, so what it writes
    must put the subscription on the wire before the PING whose PONG ends its wait.

    nats-py's `flush` writes its PING straight to the socket, while the SUB it follows
    can still wait in the client's buffer for the flusher task: the PONG then came back
    before the server had the subscription, and requests sent at once from another
    connection found nobody serving (NoResponders, about one run of this file in ten)."""
    connection = await nats.connect(settings.nats_url)
    written: list[bytes] = []
    transport: Any = connection._transport

    def spy(original: Callable[[Any], None], many: bool) -> Callable[[Any], None]:
        def write(data: Any) -> None:
            written.extend(bytes(d) for d in (data if many else [data]))
            original(data)

        return write

    transport.write = spy(transport.write, many=False)
    transport.writelines = spy(transport.writelines, many=True)

    async def echo(body: bytes) -> bytes:
        return body

    server = RequestServer("rpc.order", echo)
    try:
        await server.start(connection)
        wire = b"".join(written)
        assert b"SUB rpc.order" in wire and b"PING" in wire
        assert wire.index(b"SUB rpc.order") < wire.rindex(b"PING"), wire
        replies = await asyncio.gather(
            *(bus.request("rpc.order", f"m{i}".encode(), timeout=5) for i in range(5))
        )
        assert replies == [f"m{i}".encode() for i in range(5)]
    finally:
        await server.stop()
        await connection.close()
