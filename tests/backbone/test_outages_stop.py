"""A service stopped while it waits out a bus outage stops, whatever error its
cancellation became: nats-py turns a cancelled request into its own TimeoutError."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from nats.errors import TimeoutError as NatsTimeout

from assay.bus._outages import again_through_outages, publish_through_outages, through_outages
from assay.bus._records import Delivery
from assay_schemas import AgentStepLogged, Event, Producer

pytestmark = pytest.mark.timeout(20)

EVENT = AgentStepLogged(
    event_id=AgentStepLogged.id_for("r1", 0),
    campaign_id="c1",
    run_id="r1",
    step=0,
    producer=Producer(service="test", version="0"),
)


class _Waiting:
    """What the bus does while a server is slow: waits, and when the wait is cancelled
    raises nats-py's timeout instead (as a request does when its connection closes)."""

    def __init__(self) -> None:
        self.calls = 0
        self.waiting = asyncio.Event()

    async def wait(self) -> Any:
        self.calls += 1
        self.waiting.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise NatsTimeout from None

    async def publish(self, event: Event, *, encoded: bytes | None = None) -> Any:
        return await self.wait()


def _publish(bus: _Waiting) -> Awaitable[Any]:
    return publish_through_outages(bus, EVENT)  # type: ignore[arg-type]


def _again(bus: _Waiting) -> Awaitable[Any]:
    return again_through_outages(bus.wait, "binding a consumer")


def _handler(bus: _Waiting) -> Awaitable[Any]:
    async def handle(event: Event, delivery: Delivery) -> None:
        await bus.wait()

    return through_outages(handle, EVENT, None, "durable")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "retrying", [_publish, _again, _handler], ids=["publish", "again", "handler"]
)
async def test_a_stop_mid_outage_is_a_stop_not_an_outage(
    retrying: Callable[[_Waiting], Awaitable[Any]],
) -> None:
    bus = _Waiting()
    work = asyncio.ensure_future(retrying(bus))
    await bus.waiting.wait()
    work.cancel()
    # Before: the timeout was taken for an outage and the work ran again, 0.5 s later.
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(work, timeout=0.3)
    assert bus.calls == 1


async def test_an_outage_not_stopped_is_still_waited_out() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 2:
            raise NatsTimeout
        return "bound"

    assert await again_through_outages(flaky, "binding a consumer") == "bound"
    assert calls == 2
