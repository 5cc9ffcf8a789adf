"""Durable pull consumers: `BatchPull` (on nats-py's own `fetch`) hands whole batches over
in order (the aggregator's), `WorkerPull` (on pull requests of its own, counted: see
`_Asked`) handles each message in a task of its own, up to a number of workers at a time
(every other consumer's).

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
import contextvars
import itertools
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import DEFAULT_PREFIX, ConsumerConfig, Header
from nats.js.errors import NotFoundError

from ._pacing import KeepAlive

__all__ = ["BatchPull", "WorkerPull", "waiting_aside"]

log = logging.getLogger("assay.bus")

_STOP_GRACE_S = 10.0
"""How long `stop` lets the batch in hand finish (each message settled) before cancelling."""
_RETRY_S = 1.0
"""Pause after a failed fetch (a reconnect, a leader election) before the next."""
_REQUEST_GRACE_S = 5.0
"""How long past its expiry a pull request that neither ended nor brought all it asked
for still counts as out (its end, a 408, is late on a busy event loop)."""
_ORDINARY_ENDS = frozenset({"404", "408"})
"""A pull request's ends that say nothing is wrong: nothing to deliver, or it expired."""
_HEARTBEAT = "100"


@dataclass
class _Slot:
    """A handler's worker slot, and whether it holds it now (not while waiting aside)."""

    pull: WorkerPull
    held: bool = True


_WORKER: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar(
    "assay_bus_worker", default=None
)
"""The worker slot of the handler running in this context (None: no worker's)."""


@contextlib.asynccontextmanager
async def waiting_aside() -> AsyncIterator[None]:
    """Give this handler's worker slot to the consumer's next message while the block
    waits on another message's work (a run waiting for another run to end), and take a
    slot again before going on. Without it, handlers all waiting on messages still in
    the log would hold every worker, and those messages would never be handled. Outside
    a worker's handler it does nothing."""
    slot = _WORKER.get()
    if slot is None or not slot.held:
        yield
        return
    slot.pull.step_aside(slot)
    try:
        yield
    except BaseException:  # the handler unwinds (cancelled, stopping): no slot to take
        slot.pull.leave_aside()
        raise
    await slot.pull.step_back(slot)


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

    async def start(self, nc: Client) -> None:
        """Create (or bind) the durable consumer and start pulling."""
        self._stopping = False
        self._sub = await nc.jetstream().pull_subscribe(
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
            msgs = await _fetch(sub, self.batch_size, self.wait_s, self.durable)
            if not msgs:
                continue
            self._handling = True
            self.batches += 1
            try:
                await self.handle(msgs)
            finally:
                self._handling = False
            if len(msgs) < self.batch_size and self.gather_s > 0:
                await asyncio.sleep(self.gather_s)


@dataclass
class _Request:
    """The pull request out: the token its reply subject ends in, the messages it may still
    bring, and when to stop counting them if neither they nor its end come."""

    token: str
    left: int
    forget_at: float


@dataclass
class _Asked:
    """The one pull request a `WorkerPull` has out, and what it may still bring.

    Counted so that what is in hand plus what may still come never passes the batch size:
    nats-py's fetch gave up on a request at its own deadline while the server went on
    delivering to it, and handed the late messages out with its next fetch, on top of what
    that fetch asked for; on a busy event loop a runner meant to admit 64 submissions at
    once held all 100 of a test's. A delivery does not say which request it answers (its
    subject is the event's), so each counts against the request out: one forgotten by
    `forget_the_lost` and late after all is taken from its successor's count."""

    nc: Client
    reconnects: int
    out: _Request | None = None
    _tokens: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def owed(self) -> int:
        """Messages the request out may still bring."""
        return self.out.left if self.out is not None else 0

    def new(self, batch: int, wait_s: float) -> str:
        """A request for `batch` messages, waiting up to `wait_s` for them: its token."""
        token = str(next(self._tokens))
        forget_at = time.monotonic() + wait_s + _REQUEST_GRACE_S
        self.out = _Request(token=token, left=batch, forget_at=forget_at)
        return token

    def delivered(self) -> bool:
        """A message came; whether that fulfilled the request out."""
        if self.out is None:
            return False
        self.out.left -= 1
        if self.out.left > 0:
            return False
        self.out = None
        return True

    def ended(self, token: str) -> bool:
        """The server ended `token`'s request; whether that was the one out."""
        if self.out is None or self.out.token != token:
            return False  # an earlier one's late end
        self.out = None
        return True

    def forget_the_lost(self) -> None:
        """Drop a request the server cannot answer any more: at once if the connection was
        made again since (the server forgot it), else once it is overdue."""
        reconnects = self.nc.stats["reconnects"]
        if reconnects != self.reconnects:
            self.reconnects = reconnects
            self.out = None
        elif self.out is not None and self.out.forget_at <= time.monotonic():
            self.out = None


@dataclass(kw_only=True)
class WorkerPull:
    """Pulls what free workers can take and handles each message in a task of its own,
    at most `max_workers` at a time.

    Why not faststream's concurrent pull subscriber: each message went through a memory
    stream, a task group, a limiter and faststream's middlewares, and the messages of one
    fetch were handled over many turns of the event loop, each ack flushed to the socket on
    its own; measured on the bus bench (16 workers, handlers that return at once) it
    consumed 0.14-0.19x as fast as a bare fetch-and-ack loop. Why not nats-py's `fetch`
    either: it waited for each message with a task and a timer of its own, handed a batch
    over only once the whole of it came or its deadline passed, and lost count of a request
    it gave up on (`_Asked`). Here the pull requests are JetStream's own (a batch and an
    expiry, published to the consumer's `MSG.NEXT` subject), each message starts its
    handler as it arrives, one keep-alive timer covers every message in hand, and the
    messages in hand plus those the requests out may still bring are at most `batch_size`
    (waiting for a worker or at work), so none waits for a worker unless `batch_size` is
    above `max_workers`; those that do wait in log order and are kept alive too.
    """

    subject: str
    durable: str
    stream: str
    config: ConsumerConfig
    max_workers: int
    batch_size: int
    ack_wait_s: float
    inbox_prefix: bytes
    deliver: Callable[[Msg], Awaitable[None]]
    wait_s: float = 1.0
    """How long a pull request waits for messages when the log holds none for this
    consumer."""
    _task: asyncio.Task[None] | None = None
    _stopping: bool = False
    _sub: Subscription | None = field(default=None, repr=False)
    _asked: _Asked | None = field(default=None, repr=False)
    _failed: bool = field(default=False, repr=False)
    """The last request was refused (not merely ended): pause before the next."""
    _in_hand: dict[int, Msg] = field(default_factory=dict, repr=False)
    _working: set[asyncio.Task[None]] = field(default_factory=set, repr=False)
    _room: asyncio.Event | None = field(default=None, repr=False)
    _slots: asyncio.Semaphore | None = field(default=None, repr=False)
    _aside: int = field(default=0, repr=False)
    """Handlers waiting aside (`waiting_aside`): in hand, holding no worker slot."""

    async def start(self, nc: Client) -> None:
        """Create (or bind) the durable consumer and start pulling."""
        if self.max_workers < 1 or self.batch_size < 1:
            raise ValueError(f"{self.durable}: max_workers and batch_size must be at least 1")
        self._stopping = False
        self._room = asyncio.Event()
        self._slots = asyncio.Semaphore(self.max_workers)
        self._asked = _Asked(nc=nc, reconnects=nc.stats["reconnects"])
        await _ensure_consumer(nc.jetstream(), self.stream, self.subject, self.config)
        deliver = self.inbox_prefix.decode() + nc.new_inbox().rsplit(".", 1)[-1]
        self._sub = await nc.subscribe(f"{deliver}.*", cb=self._arrived)
        self._task = asyncio.create_task(self._pull(nc, deliver), name=f"pull {self.durable}")

    async def stop(self) -> None:
        """Stop pulling and cancel the handlers at work (as faststream's subscriber did: their
        messages, unsettled, are delivered again); the durable consumer stays."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._sub is not None:
            with contextlib.suppress(Exception):  # the connection may be gone already
                await self._sub.unsubscribe()
            self._sub = None
        working = list(self._working)
        for handler in working:
            handler.cancel()
        if working:
            await asyncio.wait(working, timeout=_STOP_GRACE_S)

    @property
    def in_hand(self) -> int:
        """Messages delivered and not yet settled (waiting for a worker or at work)."""
        return len(self._working)

    async def _pull(self, nc: Client, deliver: str) -> None:
        assert self._room is not None and self._asked is not None
        asked = self._asked
        next_subject = f"{DEFAULT_PREFIX}.CONSUMER.MSG.NEXT.{self.stream}.{self.durable}"
        expires = int(self.wait_s * 1e9)
        with KeepAlive(self._in_hand.values(), self.ack_wait_s):
            while not self._stopping:
                asked.forget_the_lost()
                room = self.batch_size - (len(self._working) - self._aside) - asked.owed
                if room <= 0 or asked.out is not None:  # one request out at a time
                    self._room.clear()
                    with contextlib.suppress(TimeoutError):  # to forget a lost request
                        await asyncio.wait_for(self._room.wait(), self.wait_s)
                    continue
                if self._failed:
                    self._failed = False
                    await asyncio.sleep(_RETRY_S)
                    continue
                token = asked.new(room, self.wait_s)
                request = json.dumps({"batch": room, "expires": expires}).encode()
                try:
                    await nc.publish(next_subject, request, reply=f"{deliver}.{token}")
                except Exception as e:  # closed under us: stopping, or gone for good
                    asked.ended(token)
                    log.warning(
                        "%s: pull request failed (%s: %s)", self.durable, type(e).__name__, e
                    )
                    await asyncio.sleep(_RETRY_S)

    async def _arrived(self, msg: Msg) -> None:
        """A message or a request's end, from the server: a message starts its handler."""
        assert self._asked is not None and self._room is not None
        status = msg.headers.get(Header.STATUS) if msg.headers else None
        if status:
            self._ended(msg.subject.rsplit(".", 1)[-1], status, msg)
            return
        if self._asked.delivered():
            self._room.set()
        if self._stopping:  # unsettled: delivered again after the ack wait
            return
        self._in_hand[id(msg)] = msg
        handler = asyncio.create_task(self._work(msg))
        self._working.add(handler)
        handler.add_done_callback(self._done)

    def _ended(self, token: str, status: str, msg: Msg) -> None:
        """A request's end: expired (408) or nothing to deliver (404) are its ordinary
        ends; anything else (409: too many requests waiting, a leader change; 400) is
        said, and the next request waits a while."""
        assert self._asked is not None and self._room is not None
        if status == _HEARTBEAT or not self._asked.ended(token):
            return
        if status not in _ORDINARY_ENDS:
            description = msg.headers.get(Header.DESCRIPTION, "") if msg.headers else ""
            log.warning("%s: pull request ended with %s %s", self.durable, status, description)
            self._failed = True
        self._room.set()

    async def _work(self, msg: Msg) -> None:
        assert self._slots is not None
        slot = _Slot(self, held=False)
        try:
            await self._slots.acquire()
            slot.held = True
            _WORKER.set(slot)  # this task's own context: its handler's alone
            await self.deliver(msg)
        except Exception:  # unsettled: JetStream delivers it again; the consumer goes on
            log.exception("%s: delivery of a message failed", self.durable)
        finally:
            if slot.held:
                self._slots.release()
            del self._in_hand[id(msg)]

    def step_aside(self, slot: _Slot) -> None:
        """A handler waits aside: its slot to another message, and room for one more."""
        assert self._slots is not None and self._room is not None
        slot.held = False
        self._aside += 1
        self._slots.release()
        self._room.set()

    async def step_back(self, slot: _Slot) -> None:
        """A handler done waiting aside: a slot again (waiting its turn for one; cancelled
        meanwhile, it holds none, so it gives none back)."""
        assert self._slots is not None
        try:
            await self._slots.acquire()
            slot.held = True
        finally:
            self._aside -= 1

    def leave_aside(self) -> None:
        """A handler that waited aside ends without a slot (its unwinding frees none)."""
        self._aside -= 1

    def _done(self, handler: asyncio.Task[None]) -> None:
        self._working.discard(handler)
        if self._room is not None:
            self._room.set()


async def _ensure_consumer(
    js: JetStreamContext, stream: str, subject: str, config: ConsumerConfig
) -> None:
    """The durable consumer `config` names, made if missing (as nats-py's `pull_subscribe`
    does: an existing one is bound as it is)."""
    durable = config.durable_name or ""
    try:
        await js.consumer_info(stream, durable)
    except NotFoundError:
        made = replace(config, name=durable, filter_subject=config.filter_subject or subject)
        await js.add_consumer(stream, config=made)


async def _fetch(
    sub: JetStreamContext.PullSubscription, batch: int, wait_s: float, durable: str
) -> list[Msg]:
    """Up to `batch` messages, or none when the log held none for `wait_s` or the fetch
    failed (reconnecting, a leader election: the log is still there, so pause and go on)."""
    try:
        return await sub.fetch(batch, timeout=wait_s)
    except TimeoutError:  # asyncio's, and nats-py's own (a subclass)
        return []
    except Exception as e:
        log.warning(
            "%s: fetch failed (%s: %s); again in %.0fs", durable, type(e).__name__, e, _RETRY_S
        )
        await asyncio.sleep(_RETRY_S)
        return []
