"""How deliveries are paced: a handler at work keeps its message, a failed one waits."""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

from faststream.nats.message import NatsMessage

__all__ = ["backoff", "keep_alive", "whole_message"]

log = logging.getLogger("assay.bus")


async def keep_alive(msg: NatsMessage, ack_wait_s: float) -> None:
    """Tell JetStream we are still working, so long handlers are not redelivered."""
    interval = max(0.5, ack_wait_s / 3)
    while True:
        await asyncio.sleep(interval)
        try:
            await msg.in_progress()
        except Exception:  # the connection may be reconnecting; redelivery is the fallback
            log.debug("in_progress failed", exc_info=True)


async def whole_message(msg: Any) -> Any:
    """Hand the handler faststream's message itself: parsing, acks and dead letters happen
    in one place (`Bus._deliver`), and no dependency injection runs per message (apply_types
    is off on our broker: resolving it cost more than the rest of the delivery)."""
    return msg


def backoff(attempt: int) -> float:
    """Redelivery delay: exponential with jitter, capped."""
    return float(min(30.0, 0.2 * (2 ** (attempt - 1))) * (0.5 + random.random() / 2))
