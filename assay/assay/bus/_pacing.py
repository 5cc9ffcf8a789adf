"""How deliveries are paced: a handler at work keeps its message, a failed one waits."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Collection

from nats.aio.msg import Msg

__all__ = ["KeepAlive", "backoff", "heartbeat_s"]

log = logging.getLogger("assay.bus")


def heartbeat_s(ack_wait_s: float) -> float:
    """How often a handler at work tells JetStream so: a third of the ack wait."""
    return max(0.5, ack_wait_s / 3)


class KeepAlive:
    """Tells JetStream we are still working on `waiting` (the messages not yet settled;
    the caller removes them as it settles them), every third of the ack wait, until the
    block ends: a timer, not a task per message (most handlers end long before the first
    beat, and a task made and cancelled per delivery cost more than the delivery)."""

    def __init__(self, waiting: Collection[Msg], ack_wait_s: float) -> None:
        self._waiting = waiting
        self._interval = heartbeat_s(ack_wait_s)
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._sending: asyncio.Task[None] | None = None

    def __enter__(self) -> KeepAlive:
        self._timer = self._loop.call_later(self._interval, self._beat)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._sending is not None:
            self._sending.cancel()

    def _beat(self) -> None:
        if self._sending is None or self._sending.done():
            self._sending = self._loop.create_task(self._send(list(self._waiting)))
        self._timer = self._loop.call_later(self._interval, self._beat)

    async def _send(self, waiting: list[Msg]) -> None:
        for msg in waiting:
            try:
                await msg.in_progress()
            except Exception:  # reconnecting, or settled meanwhile; redelivery is the fallback
                log.debug("in_progress failed", exc_info=True)


def backoff(attempt: int) -> float:
    """Redelivery delay: exponential with jitter, capped."""
    return float(min(30.0, 0.2 * (2 ** (attempt - 1))) * (0.5 + random.random() / 2))
