"""A durable pull consumer read in batches with nats-py's own `fetch` (the aggregator's).

Why not faststream's batch mode (`PullSub(batch=True)`): it gathers a batch over several
fetches and catches only `nats.errors.TimeoutError`, while nats-py's fetch also raises
asyncio's own `TimeoutError` when its deadline passes between two requests; the batch
gathered so far is then dropped unhandled and unacked, and JetStream hands it out again
only after the ack wait (minutes). Measured with faststream 0.7.8 and nats-py 2.16: of
1,500 events fed at a steady 250 a second, 70 to 140 were left so in each try; the
steady-log test in tests/backbone/test_bus_batches.py checks that none is here.
nats-py's fetch itself returns at once with what the log holds, so a quiet log costs a
request per `wait_s`; a busy one that the consumer keeps up with would cost a request (and
the server's "no messages" answer) per event or two, so after a batch that drained the log
the next fetch waits `gather_s` for the events to gather (a batch that filled goes on at
once: the consumer is behind).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig

__all__ = ["BatchPull"]

log = logging.getLogger("assay.bus")

_STOP_GRACE_S = 10.0
"""How long `stop` lets the batch in hand finish (each message settled) before cancelling."""
_RETRY_S = 1.0
"""Pause after a failed fetch (a reconnect, a leader election) before the next."""


@dataclass(kw_only=True)
class BatchPull:
    """Fetches up to `batch_size` messages at a time and hands each batch to `handle`."""

    subject: str
    durable: str
    stream: str
    config: ConsumerConfig
    batch_size: int
    wait_s: float
    inbox_prefix: bytes
    handle: Callable[[list[Msg]], Awaitable[None]]
    gather_s: float = 0.0
    """Pause after a batch that drained the log, before the next fetch."""
    batches: int = field(default=0, init=False)
    """Batches fetched and handed over so far (what a busy log cost in fetches)."""
    _task: asyncio.Task[None] | None = None
    _stopping: bool = False
    _handling: bool = False
    _sub: JetStreamContext.PullSubscription | None = field(default=None, repr=False)

    async def start(self, js: JetStreamContext) -> None:
        """Create (or bind) the durable consumer and start pulling."""
        self._stopping = False
        self._sub = await js.pull_subscribe(
            self.subject,
            durable=self.durable,
            stream=self.stream,
            config=self.config,
            inbox_prefix=self.inbox_prefix,
        )
        self._task = asyncio.create_task(self._pull(self._sub), name=f"pull {self.durable}")

    async def stop(self) -> None:
        """Finish the batch in hand (bounded), stop pulling; the durable consumer stays."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            if not self._handling:
                task.cancel()
            done, _ = await asyncio.wait({task}, timeout=_STOP_GRACE_S)
            if not done:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._sub is not None:
            with contextlib.suppress(Exception):  # the connection may be gone already
                await self._sub.unsubscribe()
            self._sub = None

    async def _pull(self, sub: JetStreamContext.PullSubscription) -> None:
        while not self._stopping:
            try:
                msgs = await sub.fetch(self.batch_size, timeout=self.wait_s)
            except TimeoutError:  # asyncio's, and nats-py's own (a subclass)
                continue
            except Exception as e:  # reconnecting, a leader election: the log is still there
                log.warning(
                    "%s: fetch failed (%s: %s); again in %.0fs",
                    self.durable,
                    type(e).__name__,
                    e,
                    _RETRY_S,
                )
                await asyncio.sleep(_RETRY_S)
                continue
            self._handling = True
            self.batches += 1
            try:
                await self.handle(msgs)
            finally:
                self._handling = False
            if len(msgs) < self.batch_size and self.gather_s > 0:
                await asyncio.sleep(self.gather_s)
