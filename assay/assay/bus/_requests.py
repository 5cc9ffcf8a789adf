"""Core-NATS request serving straight on the nats-py connection.

faststream's subscriber machinery (a memory queue, a task group, middlewares, a fake
reply publisher) cost about half a millisecond per sandbox command; a request needs
none of it: a slot, the handler, a reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from assay.telemetry import extract_context, serving, tracer

__all__ = ["RequestServer"]

log = logging.getLogger("assay.bus")

QUEUED_PER_WORKER = 8
"""Requests let wait for a slot per slot, beyond which the subscription is held back
(unmetered requests go past the waiting ones, not past this bound)."""


SUBSCRIBED_TIMEOUT_S = 10.0
"""How long :func:`subscribed` waits for the client's buffer to reach the socket (nats-py's
own flush waits as long for its PONG)."""


async def subscribed(connection: Client) -> None:
    """Return once the server has every subscription made so far on ``connection``.

    nats-py's `flush` writes its PING straight to the socket while a SUB can still wait in
    the client's buffer for the flusher task, so its PONG can come back before the server
    has the subscription (a request server "started" and then met NoResponders). Having the
    flusher write the buffer first puts the PING after the SUB, and its PONG after the
    server took it.
    """
    # Bounded here: nats-py waits for its flusher without a limit unless connected with one.
    await asyncio.wait_for(connection._flush_pending(force_flush=True), SUBSCRIBED_TIMEOUT_S)
    await connection.flush()


class RequestServer:
    """Answers requests on one subject, at most `max_workers` at a time."""

    def __init__(
        self,
        subject: str,
        handler: Callable[[bytes], Awaitable[bytes]],
        *,
        queue: str = "",
        max_workers: int = 8,
        unmetered: Callable[[bytes], bool] | None = None,
    ) -> None:
        self.subject, self.queue = subject, queue
        self._unmetered = unmetered
        """Requests answered at once, outside the `max_workers` slots: short ones whose
        lateness costs more than a slot (a drive's lease renewal behind long commands)."""
        self.service = ""
        """The service answering (set by `Bus.serve_requests`): its spans carry its name."""
        self._handler = handler
        self._max_workers = max_workers
        self._slots = asyncio.Semaphore(max_workers)
        self._admitted = asyncio.Semaphore(max_workers * QUEUED_PER_WORKER)
        self._sub: Subscription | None = None
        self._answering: set[asyncio.Task[None]] = set()

    async def start(self, connection: Client) -> None:
        """Subscribe on the (connected) client; requests reach it once this returns."""
        self._slots = asyncio.Semaphore(self._max_workers)
        self._admitted = asyncio.Semaphore(self._max_workers * QUEUED_PER_WORKER)
        self._sub = await connection.subscribe(self.subject, queue=self.queue, cb=self._on_msg)
        await subscribed(connection)

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
        if self._unmetered is not None and self._unmetered(msg.data):
            self._spawn(self._answer(msg))
            return
        # Waiting here, once `QUEUED_PER_WORKER` requests per slot wait or run, holds back
        # the subscription's next message (an unmetered one too): the bound on what waits.
        await self._admitted.acquire()
        self._spawn(self._answer_in_slot(msg))

    def _spawn(self, answer: Coroutine[None, None, None]) -> None:
        task = asyncio.create_task(answer)
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    async def _answer_in_slot(self, msg: Msg) -> None:
        try:
            async with self._slots:
                await self._answer(msg)
        finally:
            self._admitted.release()

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
