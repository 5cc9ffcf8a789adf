"""Handlers run again while the bus or the blob store is down, not charged to the message."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from nats.errors import ConnectionClosedError, NoRespondersError, OutboundBufferLimitError
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NoStreamResponseError, ServiceUnavailableError

from assay_schemas import BlobCorrupted, BlobNotFound, BusError, Event, StoreError, UploadRefused

from ..lifecycle import stop_if_cancelled
from ._records import Delivery, Published

if TYPE_CHECKING:
    from ._bus import Bus

__all__ = [
    "OUTAGE_RETRY_S",
    "again_through_outages",
    "publish_through_outages",
    "through_outages",
]

log = logging.getLogger("assay.bus")

OUTAGE_RETRY_S = 60.0
"""How long a handler is run again while the bus fails, before the failure counts as a
delivery attempt."""


async def through_outages(
    handler: Callable[[Any, Delivery], Awaitable[None]],
    event: Event,
    delivery: Delivery,
    durable: str,
) -> None:
    """Run a handler; while the bus or blob store fails (a restart, a leader election, an
    S3 outage), run it again.

    Such failures are not the message's fault and must not use up its deliveries: a
    message dead-lettered because the log was down for seconds would be lost. Handlers
    are idempotent (they read the log before acting), so running one again is safe.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + OUTAGE_RETRY_S
    delay = 0.5
    while True:
        try:
            await handler(event, delivery)
            return
        except (BusError, NatsError, StoreError) as e:
            stop_if_cancelled(e)
            # A missing, corrupted or refused blob is a fact about the data, not an outage.
            data = isinstance(e, BlobNotFound | BlobCorrupted | UploadRefused)
            if data or loop.time() + delay > deadline:
                raise
            log.warning(
                "%s: bus unavailable while handling %s (%s: %s); retrying in %.1fs",
                durable,
                event.event_id,
                type(e).__name__,
                e,
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


_OUTAGES = (
    NatsTimeout,
    asyncio.TimeoutError,
    NoStreamResponseError,
    NoRespondersError,
    ServiceUnavailableError,
    ConnectionClosedError,
    OutboundBufferLimitError,
)
"""What a publish meets while the log is down or electing a leader: nothing says the
event was refused (a refusal, a permission or a wrong-sequence answer is not one)."""


# Each loop below first asks `stop_if_cancelled`: a service being stopped is no outage
# (nats-py turns a cancelled request into its TimeoutError), and waiting one out held the
# stop for the whole minute.


def _is_outage(error: Exception) -> bool:
    """Whether a failed publish met an outage, by its class or the class of its cause."""
    return isinstance(error, _OUTAGES) or isinstance(error.__cause__, _OUTAGES)


async def publish_through_outages(
    bus: Bus, event: Event, *, encoded: bytes | None = None
) -> Published:
    """Publish `event`, and while the bus fails (a restart, a leader election) publish it
    again, for up to `OUTAGE_RETRY_S`.

    For an event that follows what cannot be done twice: a step whose tools already ran
    in the sandbox. Left to `through_outages`, the whole handler would run again from the
    log, and the unlogged step's commands would run a second time on a sandbox they have
    already changed. Publishing the same event again is safe: the log stores it once
    (`Nats-Msg-Id` is its id). Any other failure (refused, not permitted) is raised at once.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + OUTAGE_RETRY_S
    delay = 0.5
    while True:
        try:
            return await bus.publish(event, encoded=encoded)
        except (BusError, NatsError) as e:
            stop_if_cancelled(e)
            if not _is_outage(e) or loop.time() + delay > deadline:
                raise
            log.warning(
                "publish of %s %s failed (%s); publishing it again in %.1fs",
                event.event_type,
                event.event_id,
                e,
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


T = TypeVar("T")


async def again_through_outages(action: Callable[[], Awaitable[T]], what: str) -> T:
    """`action()`, and while the server restarts or elects a leader (an outage, by the
    error's class or its cause's) `action()` again, for up to `OUTAGE_RETRY_S`: what a
    service does once at start (a durable consumer created or bound) must not end the
    service because a node was lost that moment; its connection waits out the same."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + OUTAGE_RETRY_S
    delay = 0.5
    while True:
        try:
            return await action()
        except (TimeoutError, BusError, NatsError) as e:
            stop_if_cancelled(e)
            if not _is_outage(e) or loop.time() + delay > deadline:
                raise
            log.warning("%s failed (%s: %s); again in %.1fs", what, type(e).__name__, e, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
