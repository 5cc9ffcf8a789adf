"""Core-NATS request serving straight on the nats-py connection.

faststream's subscriber machinery (a memory queue, a task group, middlewares, a fake
reply publisher) cost about half a millisecond per sandbox command; a request needs
none of it: a slot, the handler, a reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from assay.telemetry import extract_context, serving, tracer

__all__ = ["RequestServer"]

log = logging.getLogger("assay.bus")


class RequestServer:
    """Answers requests on one subject, at most `max_workers` at a time."""

    def __init__(
        self,
        subject: str,
        handler: Callable[[bytes], Awaitable[bytes]],
        *,
        queue: str = "",
        max_workers: int = 8,
    ) -> None:
        self.subject, self.queue = subject, queue
        self.service = ""
        """The service answering (set by `Bus.serve_requests`): its spans carry its name."""
        self._handler = handler
        self._max_workers = max_workers
        self._slots = asyncio.Semaphore(max_workers)
        self._sub: Subscription | None = None
        self._answering: set[asyncio.Task[None]] = set()

    async def start(self, connection: Client) -> None:
        """Subscribe on the (connected) client; requests reach it once this returns."""
        self._slots = asyncio.Semaphore(self._max_workers)
        self._sub = await connection.subscribe(self.subject, queue=self.queue, cb=self._on_msg)
        await connection.flush()

    async def stop(self) -> None:
        """Stop taking requests; requests still being answered are cancelled."""
        if self._sub is not None:
            with contextlib.suppress(Exception):  # the connection may already be gone
                await self._sub.unsubscribe()
            self._sub = None
        for task in list(self._answering):
            task.cancel()
        await asyncio.gather(*self._answering, return_exceptions=True)

    async def _on_msg(self, msg: Msg) -> None:
        # Waiting here for a free slot holds back the subscription's next message.
        await self._slots.acquire()
        task = asyncio.create_task(self._answer(msg))
        self._answering.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._answering.discard(task)
        self._slots.release()

    async def _answer(self, msg: Msg) -> None:
        ctx = extract_context(msg.headers)
        with (
            serving(self.service),
            tracer("assay.bus").start_as_current_span(f"request {self.subject}", context=ctx),
        ):
            try:
                reply = await self._handler(msg.data)
            except Exception:  # the requester times out; this server keeps serving
                log.exception("request handler on %s failed", self.subject)
                return
        if msg.reply:
            try:
                await msg.respond(reply)
            except Exception:  # a lost connection: the requester times out and retries
                log.warning("reply on %s failed", self.subject, exc_info=True)
