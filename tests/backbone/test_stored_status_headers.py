"""Stored messages dressed as NATS status messages: a publisher may store any header block
(a `Status` header, or a status code in the header line itself) with an empty body, and
nats-py took such a message, once delivered from the stream, for a heartbeat, flow control
or a pull's 404/408/409: replays stopped (a timeout) and durable consumers swallowed it,
never acked. Every reader must see it as the undecodable message it is — against a real
nats-server, the hostile messages written on a raw socket as a publisher would."""

from __future__ import annotations

import asyncio
import socket
from urllib.parse import urlparse

import pytest

from assay.bus import DEAD_REASON, Bus, Delivery, Refusal, Skipped
from assay.config import Settings
from assay_schemas import AgentStepLogged, Event
from tests.backbone.test_bus import dead_letters, step, step_consumer, wait_for
from tests.backbone.test_bus_batches import _pending_once_settled, folder

pytestmark = pytest.mark.timeout(60)

HOSTILE = [
    b"NATS/1.0 100 Idle Heartbeat\r\n\r\n",
    b"NATS/1.0 100 FlowControl Request\r\n\r\n",
    b"NATS/1.0 404 No Messages\r\n\r\n",
    b"NATS/1.0 408 Request Timeout\r\n\r\n",
    b"NATS/1.0 409 Consumer Deleted\r\n\r\n",
    b"NATS/1.0 503\r\n\r\n",
    b"NATS/1.0\r\nStatus: 100\r\nDescription: Idle Heartbeat\r\n\r\n",
    b"NATS/1.0\r\nStatus: 404\r\n\r\n",
    b"NATS/1.0\r\nStatus: 408\r\n\r\n",
    b"NATS/1.0\r\nstatus: 409\r\nNats-Msg-Id: x\r\n\r\n",
    b"NATS/1.0\r\nStatus: 503\r\n\r\n",
]
"""Header blocks stored with an empty body: each of the statuses nats-py acts on, in
the header line and as a header."""

MALFORMED = [
    b"NATS/1.0",
    b"NATS/",
    b"XXXX/1.0\r\n\r\n",
    b"NATS/1.0\r\nno colon here\r\n\r\n",
    b"NATS/1.0\r\nK: \xff\xfe\r\n\xff: v\r\n\r\n",
]
"""Header blocks the server stores as they came and nats-py's parser does not expect
(the first two made it raise in its read loop)."""


def store_raw(settings: Settings, subject: str, blocks: list[bytes]) -> None:
    """HPUB each header block with no body, as any client allowed on `subject` can."""
    url = urlparse(settings.nats_url)
    with socket.create_connection((url.hostname or "127.0.0.1", url.port or 4222), 5) as s:
        s.recv(4096)  # INFO
        s.sendall(b'CONNECT {"verbose":false,"headers":true}\r\n')
        for block in blocks:
            s.sendall(
                b"HPUB %s %d %d\r\n%s\r\n" % (subject.encode(), len(block), len(block), block)
            )
        s.sendall(b"PING\r\n")
        assert s.recv(4096).startswith(b"PONG"), "the server refused the raw publishes"


async def _hostile_between_two_steps(bus: Bus, settings: Settings) -> None:
    await bus.publish(step("r1", 0))
    store_raw(settings, bus.subjects.event("AgentStepLogged", "c1", "r1"), HOSTILE + MALFORMED)
    await bus.publish(step("r1", 1))


async def test_a_replay_reads_past_them_and_lists_them_skipped(
    bus: Bus, settings: Settings
) -> None:
    await _hostile_between_two_steps(bus, settings)
    skipped: list[Skipped] = []
    logged = [e async for e in bus.replay(skipped=skipped)]
    assert [e.event.step for e in logged] == [0, 1]  # type: ignore[attr-defined]
    assert [s.sequence for s in skipped] == list(range(2, 2 + len(HOSTILE + MALFORMED)))
    # A run's history by lookups and then a consumer: the same messages, skipped.
    assert [e.step for e in await bus.run_events("c1", "r1")] == [0, 1]  # type: ignore[attr-defined]


async def test_a_durable_consumer_dead_letters_them_and_goes_on(settings: Settings) -> None:
    async with Bus(settings, service="test") as publisher:
        await _hostile_between_two_steps(publisher, settings)
    async with step_consumer(settings) as (consumer, seen):
        await wait_for(lambda: seen == [0, 1], timeout=20.0)
        dead = await dead_letters(consumer, "steps", len(HOSTILE + MALFORMED))
        assert len(dead) == len(HOSTILE + MALFORMED)
        assert all("not JSON" in h[DEAD_REASON] for _, h in dead)
        assert await _pending_once_settled(consumer, "steps") == (0, 0)


async def test_a_batched_consumer_refuses_each_and_goes_on(settings: Settings) -> None:
    """The aggregator's way of consuming: pulls of many messages at a time."""
    seen: list[int] = []
    refused: list[Refusal] = []

    async def handle(event: Event, delivery: Delivery) -> None:
        assert isinstance(event, AgentStepLogged)
        seen.append(event.step)

    async def on_refused(refusal: Refusal) -> None:
        refused.append(refusal)

    async with Bus(settings, service="test") as publisher:
        await _hostile_between_two_steps(publisher, settings)
    consumer = folder(settings, handle, on_refused)
    await consumer.start()
    try:
        await wait_for(
            lambda: seen == [0, 1] and len(refused) == len(HOSTILE + MALFORMED), timeout=20.0
        )
        assert await _pending_once_settled(consumer, "folder") == (0, 0)
    finally:
        await consumer.stop()


@pytest.mark.parametrize("block", HOSTILE)
def test_no_status_is_left_for_nats_py_to_read(block: bytes) -> None:
    """The renamed block, through nats-py's own header parser: no status, the values
    kept under the renamed headers."""
    from nats.aio.client import Client

    from assay.bus._stored import as_stored

    parsed = asyncio.run(Client()._process_headers(as_stored(block))) or {}
    assert not {"Status", "Description", "status"} & set(parsed)
    assert any(k.startswith("Assay-Stored-") for k in parsed)


@pytest.mark.parametrize("block", MALFORMED)
def test_a_malformed_block_is_made_one_nats_py_parses(block: bytes) -> None:
    from nats.aio.client import Client

    from assay.bus._stored import as_stored

    fixed = as_stored(block)
    assert fixed.startswith(b"NATS/1.0\r\n") and fixed.endswith(b"\r\n\r\n")
    parsed = asyncio.run(Client()._process_headers(fixed)) or {}
    assert "Status" not in parsed


def test_an_ordinary_header_block_is_left_as_it_is() -> None:
    from assay.bus._stored import as_stored

    block = b"NATS/1.0\r\nNats-Msg-Id: a\r\nX-Note: status: fine\r\n\r\n"
    assert as_stored(block) is block
