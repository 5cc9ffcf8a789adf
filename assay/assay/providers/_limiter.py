"""Adaptive (AIMD) concurrency limit per (provider, base_url, model).

Rate limits are per endpoint and model, not per agent: every provider object that talks
to the same endpoint and model shares one limiter (see `LimiterRegistry`), so twenty agents
on one model back off together instead of each hammering the endpoint.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NamedTuple

__all__ = ["AdaptiveLimiter", "LimiterKey", "LimiterRegistry", "Slot", "default_registry"]


class LimiterKey(NamedTuple):
    """What a concurrency limit applies to."""

    provider: str
    base_url: str
    model: str


class Slot:
    """Permission for one request; report how it went with `rate_limited()`."""

    __slots__ = ("_epoch", "_limiter", "outcome")

    def __init__(self, limiter: AdaptiveLimiter, epoch: int) -> None:
        self._limiter = limiter
        self._epoch = epoch
        self.outcome: str = "success"

    def rate_limited(self) -> None:
        """Mark this request as answered with 429 (shrinks the limit on release)."""
        self.outcome = "rate_limited"

    def neutral(self) -> None:
        """Mark this request as neither success nor 429 (e.g. a 500): the limit stays."""
        self.outcome = "neutral"


class AdaptiveLimiter:
    """At most `limit` requests in flight; halve on 429, +1 after a run of successes.

    Several requests in flight together often all see the same 429 burst; only the first
    one that was admitted under the current limit shrinks it (one decrease per "epoch",
    as TCP does once per round trip), otherwise one burst would collapse the limit to 1.
    """

    def __init__(self, max_concurrency: int, *, recovery_successes: int = 10) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.max_concurrency = max_concurrency
        self.recovery_successes = max(1, recovery_successes)
        self._limit = max_concurrency
        self._in_flight = 0
        self._successes = 0
        self._epoch = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.decreases = 0
        """How many times a 429 shrank the limit (metrics)."""

    @property
    def limit(self) -> int:
        """The current concurrency limit."""
        return self._limit

    @property
    def in_flight(self) -> int:
        """Requests holding a slot now."""
        return self._in_flight

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Slot]:
        """Wait for a free slot, hold it for one request, then record the outcome."""
        await self._acquire()
        slot = Slot(self, self._epoch)
        try:
            yield slot
        except BaseException:
            if slot.outcome == "success":
                slot.outcome = "neutral"
            raise
        finally:
            self._release(slot)

    async def _acquire(self) -> None:
        if self._in_flight < self._limit and not self._waiters:
            self._in_flight += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            # Cancelled after being granted a slot: hand it on instead of leaking it.
            if fut.done() and not fut.cancelled():
                self._in_flight -= 1
                self._wake()
            else:
                self._waiters.remove(fut)
            raise

    def _release(self, slot: Slot) -> None:
        self._in_flight -= 1
        if slot.outcome == "rate_limited":
            self._successes = 0
            if slot._epoch == self._epoch:
                self._limit = max(1, self._limit // 2)
                self._epoch += 1
                self.decreases += 1
        elif slot.outcome == "success":
            self._successes += 1
            if self._successes >= self.recovery_successes and self._limit < self.max_concurrency:
                self._limit += 1
                self._successes = 0
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._in_flight < self._limit:
            fut = self._waiters.popleft()
            if not fut.done():
                self._in_flight += 1
                fut.set_result(None)


class LimiterRegistry:
    """Hands out one shared limiter per `LimiterKey`."""

    def __init__(self) -> None:
        self._limiters: dict[LimiterKey, AdaptiveLimiter] = {}
        self._lock = threading.Lock()

    def get(
        self, key: LimiterKey, max_concurrency: int, *, recovery_successes: int = 10
    ) -> AdaptiveLimiter:
        """The limiter for `key`, created with these settings on first use."""
        with self._lock:
            limiter = self._limiters.get(key)
            if limiter is None:
                limiter = AdaptiveLimiter(max_concurrency, recovery_successes=recovery_successes)
                self._limiters[key] = limiter
            return limiter

    def snapshot(self) -> dict[LimiterKey, int]:
        """Current limit of every limiter (metrics)."""
        with self._lock:
            return {key: lim.limit for key, lim in self._limiters.items()}


default_registry = LimiterRegistry()
"""Shared by every provider built without an explicit limiter."""
