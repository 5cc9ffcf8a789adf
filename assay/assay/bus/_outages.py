"""Handlers run again while the bus or the blob store is down, not charged to the message."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nats.errors import Error as NatsError

from assay_schemas import BlobCorrupted, BlobNotFound, BusError, Event, StoreError, UploadRefused

from ._records import Delivery

__all__ = ["OUTAGE_RETRY_S", "through_outages"]

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
