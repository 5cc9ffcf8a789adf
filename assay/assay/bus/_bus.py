"""One publish path and one consume path for every service."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, ClassVar, TypeVar

from faststream import AckPolicy
from faststream.nats import ConsumerConfig, DeliverPolicy, JStream, NatsMessage, PullSub
from faststream.nats.subscriber.usecases.basic import LogicSubscriber
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.errors import APIError, NotFoundError
from opentelemetry import trace
from pydantic import ValidationError

from assay.config import Settings
from assay.security.signing import TrustList, signer_for, trust_for
from assay.telemetry import extract_context, inject_headers, serving, tracer
from assay_schemas import (
    BusError,
    CampaignSpec,
    Event,
    InvalidEvent,
    LogChanged,
    NoResponders,
    Producer,
    RequestUnanswered,
    SignatureRefused,
    parse_event,
)

from ._broker import connect_error, ensure_streams, inbox_of, make_broker, refused_everywhere
from ._dead_letters import Origin, dead_letter, read_dead_letters, store_dead_letter
from ._lag import LagWatch
from ._lost import LostWatch, MaxDeliveries, advisory_subject, lost_reason
from ._outages import through_outages
from ._pacing import KeepAlive, backoff, heartbeat_s, whole_message
from ._pulls import BatchPull
from ._reads import LogReads
from ._records import Delivery, GiveUpSink, Published, Refusal, RefusalSink, Unchanged
from ._replay import LoggedEvent, Skipped, decode_log, read_raw
from ._requests import RequestServer
from ._subjects import Subjects

__all__ = ["Bus"]

log = logging.getLogger("assay.bus")

E = TypeVar("E", bound=Event)

_EXPECTED_LAST = "Nats-Expected-Last-Subject-Sequence"
_EXPECTED_LAST_ON = "Nats-Expected-Last-Subject-Sequence-Subject"
"""The subject the expectation is on, when it is not the one published to (nats-server 2.11+)."""
_WRONG_LAST_SEQUENCE = 10071
"""JetStream's error code for a failed expectation ("wrong last sequence")."""
_LOST_GRACE_MAX_S = 10.0
"""How long an advisory waits (at most; else the ack wait) for a delivery of its message
queued in this process to show up, before the message is taken as lost."""
_KEPT = 4096
"""How many slow acks and lost deliveries `Bus` remembers per kind (a bound on memory;
an advisory comes an ack wait after its delivery)."""


def _remember(seen: dict[tuple[str, int], None], key: tuple[str, int]) -> None:
    """Add `key` to `seen`, forgetting the oldest beyond `_KEPT`."""
    seen[key] = None
    if len(seen) > _KEPT:
        del seen[next(iter(seen))]


Handler = Callable[[E, Delivery], Awaitable[None]]


class Bus(LogReads):
    """The event log as services see it: typed publish, durable typed consumers."""

    connect_timeout: ClassVar[float | None] = None
    """Seconds the first connection may take before `connect` fails with a BusError
    naming the cause. None: keep trying, as a service started before its NATS should;
    the command line sets a few seconds so that a wrong address is said at once."""

    def __init__(self, settings: Settings, *, service: str, version: str = "0.1.0") -> None:
        self.settings = settings
        self.producer = Producer(service=service, version=version)
        self.subjects = Subjects(prefix=settings.subject_prefix)
        self.broker = make_broker(settings, name=f"assay-{service}")
        # Streams are created by ensure_streams on start; faststream only references them.
        self.stream = JStream(settings.stream, declare=False)
        self._dlq = JStream(f"{settings.stream}_DLQ", declare=False)
        self._connected = False
        self._durables: list[str] = []
        self._request_servers: list[RequestServer] = []
        self._pulls: list[BatchPull] = []
        self._lost: dict[str, LostWatch] = {}
        """Each consumed durable's lost last deliveries, handled as its handler's last
        failure would be (see `_lost.py`)."""
        self._advisories: list[Any] = []
        self._settling: set[asyncio.Task[None]] = set()
        self._acked: dict[tuple[str, int], None] = {}
        """Messages this process handled and acked late or on their last delivery, by
        durable and stream sequence (the latest few thousand): one acked after its ack wait
        (a late heartbeat, a paused process) has its advisory out all the same, and is no
        lost one."""
        self._lost_given_up: dict[tuple[str, int], None] = {}
        """Messages given up from an advisory here (the latest few hundred): a delivery of
        one still queued in this process (fetched, waiting for a worker past the ack wait)
        is settled unhandled, or its run would end twice."""
        self._handling: dict[tuple[str, int], asyncio.Future[bool]] = {}
        """Deliveries being handled, by durable and stream sequence; each settles to
        whether its message was acked (see `_deliver`)."""
        self._signer = signer_for(settings, service)
        self.trust: TrustList | None = None
        """Whose signatures a consumed event must carry (None: none checked); this
        deployment's (`trust_for`) from `start` on."""
        self._js: tuple[Any, JetStreamContext] | None = None
        self._lag = LagWatch(settings.stream)
        self.campaigns: dict[str, tuple[int, CampaignSpec | None]] = {}
        """`read_campaign`'s answers by subject, with the sequence they were read up to."""

    @property
    def lag(self) -> dict[str, int]:
        """Pending + unacked messages per durable, refreshed while consuming."""
        return self._lag.lag

    @property
    def js(self) -> JetStreamContext:
        """The nats-py JetStream context of the live connection (made once per connection:
        a publish per step made one each)."""
        connection = self.broker.connection
        if self._js is None or self._js[0] is not connection:
            self._js = (connection, connection.jetstream())
        return self._js[1]

    async def connect(self) -> None:
        """Connect and make sure the streams exist, without consuming yet."""
        if self._connected:
            return
        # A one-shot command facing a port nobody listens on says so at once; nats-py
        # would retry it for the whole connect timeout.
        if self.connect_timeout is not None and await refused_everywhere(self.settings.nats_url):
            refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
            raise connect_error(self.settings, refused, None)
        try:
            await asyncio.wait_for(self.broker.connect(), self.connect_timeout)
        except (NatsError, OSError, TimeoutError) as e:
            with contextlib.suppress(Exception):  # half-made connection: its error is below
                await self.broker.stop()
            raise connect_error(self.settings, e, self.connect_timeout) from e
        try:
            await ensure_streams(self.js, self.settings)
        except (NatsError, TimeoutError) as e:
            with contextlib.suppress(Exception):
                await self.broker.stop()
            raise connect_error(self.settings, e, None, streams=True) from e
        self._connected = True

    async def start(self) -> None:
        """Connect, then start every registered consumer."""
        await self.connect()
        # Read at start, as the runner's door does: the operator key may come after the bus.
        self.trust = trust_for(self.settings)
        # Before the first pull: a restarted instance must hear of what the pull finds lost.
        for watch in self._lost.values():
            await self._watch_lost(watch)
        await self.broker.start()
        for pull in self._pulls:
            await pull.start(self.js)
        for server in self._request_servers:
            await server.start(self.broker.connection)
        if self._durables:
            self._lag.start(self.js, self._durables)

    async def stop(self) -> None:
        """Drain consumers and close the connection."""
        self._lag.stop()
        for server in self._request_servers:
            await server.stop()
        for pull in self._pulls:
            await pull.stop()
        for sub in self._advisories:
            with contextlib.suppress(Exception):  # the connection may be gone already
                await sub.unsubscribe()
        self._advisories.clear()
        if self._settling:  # a lost delivery being dead-lettered: let it finish (bounded)
            _, late = await asyncio.wait(self._settling, timeout=_LOST_GRACE_MAX_S + 10.0)
            for task in late:
                task.cancel()
        await self.broker.stop()
        self._connected = False

    async def __aenter__(self) -> Bus:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- publishing ---------------------------------------------------------------------

    async def publish(
        self,
        event: Event,
        *,
        timeout: float = 10.0,
        encoded: bytes | None = None,
        unchanged: Unchanged | None = None,
    ) -> Published:
        """Append an event to the log and wait for JetStream's acknowledgement.

        `Nats-Msg-Id` is the event id, so a retried publish is stored once. `encoded`:
        the event's JSON where the caller made it already (to measure it), not made again.
        `unchanged`: store it only if that subject's last message is still the one read
        (else LogChanged, nothing stored).
        """
        subject = self.subjects.of(event)
        data = encoded if encoded is not None else event.model_dump_json().encode()
        headers = inject_headers({"Nats-Msg-Id": event.event_id})
        if unchanged is not None:
            headers[_EXPECTED_LAST] = str(unchanged.last_sequence)
            headers[_EXPECTED_LAST_ON] = unchanged.subject
        if self._signer is not None:
            headers.update(self._signer.headers(subject, data))
        try:
            # nats-py's JetStream publish itself, as faststream's broker would call it,
            # without its layers (middlewares, a command object, a correlation id per event).
            ack = await self.js.publish(
                subject, data, timeout=timeout, stream=self.stream.name, headers=headers
            )
        except APIError as e:
            if e.err_code == _WRONG_LAST_SEQUENCE and unchanged is not None:
                raise LogChanged(
                    f"{event.event_type} {event.event_id} not logged: {unchanged.subject} "
                    f"changed since it was read at sequence {unchanged.last_sequence} ({e.description})"
                ) from e
            raise self._publish_failed(event, subject, e) from e
        except Exception as e:  # nats-py raises several unrelated types here
            raise self._publish_failed(event, subject, e) from e
        if ack is None:
            raise BusError(f"publish of {event.event_id} to {subject}: no PubAck")
        return Published(ack.seq, bool(ack.duplicate))

    def _publish_failed(self, event: Event, subject: str, error: Exception) -> BusError:
        # A publish the user's permissions refuse goes unanswered: say so.
        user = self.settings.nats_user
        why = f" (may NATS user {user!r} publish {event.event_type}?)" if user else ""
        return BusError(
            f"publish of {event.event_type} {event.event_id} to {subject} failed: {error}{why}"
        )

    def replay(
        self,
        *,
        start: int = 1,
        subject: str | None = None,
        follow: bool = False,
        skipped: list[Skipped] | None = None,
        lookups: int = 0,
    ) -> AsyncIterator[LoggedEvent]:
        """Typed events in log order from `start` (all events unless `subject` filters);
        messages that are not valid events are skipped and, if given, listed in `skipped`.
        `lookups`: read that many first messages by direct lookups (see `read_raw`)."""
        raws = read_raw(
            self.js,
            self.stream.name,
            start=start,
            subject=subject or self.subjects.events,
            follow=follow,
            lookups=lookups,
        )
        return decode_log(raws, skipped)

    # --- consuming ----------------------------------------------------------------------

    def consume_event(
        self, event_type: type[E], handler: Handler[E], *, durable: str, **options: Any
    ) -> LogicSubscriber[Any] | BatchPull:
        """`consume` on the subject of one event type, refusing every other type."""
        subject = self.subjects.event(event_type.__name__)
        return self.consume(subject, handler, durable=durable, event_type=event_type, **options)

    def consume(
        self,
        subject: str,
        handler: Handler[Any],
        *,
        durable: str,
        event_type: type[Event] | tuple[type[Event], ...] = Event,
        max_deliver: int | None = None,
        max_workers: int = 1,
        batch_size: int | None = None,
        batch_wait_s: float | None = None,
        batch_gather_s: float = 0.0,
        deliver_policy: DeliverPolicy = DeliverPolicy.ALL,
        on_refused: RefusalSink | None = None,
        on_give_up: GiveUpSink | None = None,
    ) -> LogicSubscriber[Any] | BatchPull:
        """Register a durable pull consumer that hands typed events to `handler`.

        Delivery is explicit: success acks; a raise is retried with backoff until
        `max_deliver`, then handed to `on_give_up` and dead-lettered with its reason;
        messages that do not parse
        (or are not `event_type`, or disagree with their subject) are dead-lettered at
        once and reported to `on_refused`. The consumer never stops for one bad message.
        Instances that share `durable` share the work. Each pull asks for up to
        `batch_size` messages (default: one per worker); a one-worker consumer that keeps up
        with a busy log pulls many at a time and still handles them in order.
        `batch_wait_s` (one worker only): pull in batches with nats-py's fetch (see
        `BatchPull`), each pull taking what the log holds at once or waiting up to that
        long when it holds nothing; every message of a batch is still parsed, handled and
        settled on its own, in order, without faststream's work per delivery;
        `batch_gather_s`: after a batch that drained the log, wait that long before the next
        pull, so that a busy log costs one pull per interval rather than one per event or two.
        A message whose last delivery is lost (its consumer killed or paused past the ack
        wait) is given up and dead-lettered all the same, from JetStream's advisory.
        """
        limit = max_deliver or self.settings.max_deliver
        self._durables.append(durable)
        self._lost[durable] = LostWatch(durable, event_type, on_refused, on_give_up)
        config = ConsumerConfig(
            durable_name=durable,
            ack_policy=JsAckPolicy.EXPLICIT,
            max_deliver=limit,
            ack_wait=self.settings.ack_wait_s,
            deliver_policy=deliver_policy,
            filter_subject=subject,
        )
        inbox = f"{inbox_of(self.settings)}.".encode()

        async def deliver(raw: Msg) -> None:
            await self._deliver(
                raw,
                handler,
                durable=durable,
                event_type=event_type,
                limit=limit,
                on_refused=on_refused,
                on_give_up=on_give_up,
            )

        if batch_wait_s is not None:
            if max_workers != 1:
                raise ValueError(f"{durable}: batch_wait_s needs one worker (batches go in order)")

            async def on_batch(batch: list[Msg]) -> None:
                # The batch's messages wait their turn: the keep-alive covers all that are left.
                waiting = list(batch)
                with KeepAlive(waiting, self.settings.ack_wait_s):
                    while waiting:
                        try:
                            await deliver(waiting[0])
                        except Exception:  # unsettled: JetStream redelivers it; the rest go on
                            log.exception("%s: delivery of a message of a batch failed", durable)
                        waiting.pop(0)
                        # A handler that never waits would hold the loop for the whole batch.
                        await asyncio.sleep(0)

            pull = BatchPull(
                subject=subject,
                durable=durable,
                stream=self.stream.name,
                config=config,
                batch_size=batch_size or 256,
                wait_s=batch_wait_s,
                inbox_prefix=inbox,
                handle=on_batch,
                gather_s=batch_gather_s,
            )
            self._pulls.append(pull)
            return pull

        subscriber = self.broker.subscriber(
            subject,
            stream=self.stream,
            durable=durable,
            pull_sub=PullSub(batch_size=batch_size or max(1, max_workers), timeout=1.0),
            config=config,
            ack_policy=AckPolicy.MANUAL,
            max_workers=max_workers,
            decoder=whole_message,
            # Pull batches arrive on an inbox faststream names itself: keep it private too.
            inbox_prefix=inbox,
        )

        async def on_message(msg: NatsMessage) -> None:
            with KeepAlive([msg.raw_message], self.settings.ack_wait_s):
                await deliver(msg.raw_message)

        subscriber(on_message)
        return subscriber

    async def _deliver(
        self,
        raw: Msg,
        handler: Handler[Any],
        *,
        durable: str,
        event_type: type[Event] | tuple[type[Event], ...],
        limit: int,
        on_refused: RefusalSink | None = None,
        on_give_up: GiveUpSink | None = None,
    ) -> None:
        key = (durable, raw.metadata.sequence.stream)
        if key in self._lost_given_up:
            await raw.ack()  # JetStream gave up on it, and so did we: not handled now
            return
        first = self._handling.get(key)
        if first is not None:
            # A redelivery of a message this process still handles: a heartbeat came late
            # (the event loop was busy) and JetStream handed the message out again. A second
            # handler would race the first (two agent loops on one sandbox, a sandbox opened
            # twice); this delivery waits, then settles its message as the first did.
            if await asyncio.shield(first):
                await raw.ack()
            return
        loop = asyncio.get_running_loop()
        self._handling[key] = settled = loop.create_future()
        began = loop.time()
        acked = False
        try:
            acked = await self._handle(
                raw, handler, durable, event_type, limit, on_refused, on_give_up
            )
        finally:
            del self._handling[key]
            settled.set_result(acked)
            # Only an ack that may have come after the ack wait can have an advisory out:
            # the last delivery's, or one that outlasted a heartbeat's interval.
            slow = loop.time() - began >= heartbeat_s(self.settings.ack_wait_s)
            if acked and (slow or raw.metadata.num_delivered >= limit):
                _remember(self._acked, key)

    async def _handle(
        self,
        raw: Msg,
        handler: Handler[Any],
        durable: str,
        event_type: type[Event] | tuple[type[Event], ...],
        limit: int,
        on_refused: RefusalSink | None,
        on_give_up: GiveUpSink | None = None,
    ) -> bool:
        """Parse, handle and settle one delivery; True when it was acked."""
        meta = raw.metadata
        attempt = meta.num_delivered
        headers = dict(raw.headers or {})
        taken = self._take(
            meta.sequence.stream, raw.subject, raw.data, headers, durable, event_type
        )
        if isinstance(taken, Refusal):
            await self._dead_letter(raw, durable, taken.reason)
            if on_refused is not None:
                await on_refused(taken)
            return False
        event, signer = taken
        ctx = extract_context(raw.headers)
        span_name = f"{durable} handle {event.event_type}"
        with (
            serving(self.producer.service),
            tracer("assay.bus").start_as_current_span(span_name, context=ctx) as span,
        ):
            span.set_attribute("assay.event_id", event.event_id)
            span.set_attribute("assay.run_id", event.run_id or "")
            delivery = Delivery(
                meta.sequence.stream, attempt, raw.subject, headers, raw.data, signer
            )
            try:
                await through_outages(handler, event, delivery, durable)
            except Exception as e:
                span.record_exception(e)
                span.set_status(trace.Status(trace.StatusCode.ERROR, str(e)))
                reason = f"{type(e).__name__}: {e}"
                if attempt >= limit:
                    log.error(
                        "%s: giving up on %s after %d attempts: %s",
                        durable,
                        event.event_id,
                        attempt,
                        reason,
                    )
                    await self._give_up(on_give_up, event, delivery, durable, reason)
                    await self._dead_letter(raw, durable, reason)
                else:
                    log.warning(
                        "%s: attempt %d on %s failed: %s", durable, attempt, event.event_id, reason
                    )
                    await raw.nak(delay=backoff(attempt))
                return False
        await raw.ack()
        return True

    # --- request-reply (outside the log) -------------------------------------------------

    def serve_requests(self, server: RequestServer) -> RequestServer:
        """Answer `server`'s core-NATS requests (sandbox commands) from `start` to `stop`;
        not part of the log."""
        server.service = self.producer.service
        self._request_servers.append(server)
        return server

    async def request(self, subject: str, data: bytes, *, timeout: float) -> bytes:
        """Send a core-NATS request and return the reply's bytes."""
        try:
            msg = await self.broker.connection.request(
                subject, data, timeout=timeout, headers=inject_headers({})
            )
        except TimeoutError as e:  # nats-py's TimeoutError is one
            raise RequestUnanswered(f"request on {subject}: no reply in {timeout:g} s") from e
        except NoRespondersError as e:
            raise NoResponders(f"request on {subject}: nobody serves it (NoResponders)") from e
        except Exception as e:  # connection loss
            raise BusError(f"request on {subject} failed: {type(e).__name__}: {e}") from e
        return bytes(msg.data)

    @staticmethod
    async def _give_up(
        sink: GiveUpSink | None, event: Event, delivery: Delivery, durable: str, reason: str
    ) -> None:
        """Tell `sink` of the event given up on; its own failure is logged, and the dead
        letter is written all the same (JetStream would not deliver the message again)."""
        if sink is None:
            return
        try:
            await sink(event, delivery, reason)
        except Exception:
            log.exception("%s: ending what %s started failed", durable, event.event_id)

    def _take(
        self,
        sequence: int,
        subject: str,
        data: bytes,
        headers: dict[str, str],
        durable: str,
        event_type: type[Event] | tuple[type[Event], ...],
    ) -> tuple[Event, str] | Refusal:
        """The stored message as the event `durable` takes and who signed it, or why no
        handler may see it: it does not parse, or (where this deployment has a trust list)
        its signature does not tie it to a key enrolled to write it. Every service's
        consumers check this, not only the aggregator's (docs/architecture.md)."""
        event = self._parse(data, subject, durable, event_type)
        if isinstance(event, str):
            return Refusal(sequence, subject, event, data, headers)
        if self.trust is None:
            return event, ""
        check = self.trust.verify(subject, data, headers, event)
        if not check.ok:
            refused = SignatureRefused(f"{event.event_type}: {check.reason}")
            reason = f"{type(refused).__name__}: {refused}"
            return Refusal(sequence, subject, reason, data, headers, event)
        return event, check.signer

    @staticmethod
    def _parse(
        data: bytes, subject: str, durable: str, event_type: type[Event] | tuple[type[Event], ...]
    ) -> Event | str:
        """The stored message as the event `durable` takes, or why it is none."""
        try:
            event = parse_event(data, subject=subject)
            if not isinstance(event, event_type):
                raise InvalidEvent(
                    f"{event.event_type} on {subject} is not what {durable} consumes"
                )
        except Exception as e:  # whatever a stored message does, it must not stop the consumer
            return str(e) if isinstance(e, InvalidEvent) else f"{type(e).__name__}: {e}"
        return event

    async def _watch_lost(self, watch: LostWatch) -> None:
        """Subscribe to JetStream's advisory of `watch`'s durable reaching max_deliver."""

        async def on_advisory(msg: Msg) -> None:
            # A task each: one waiting on a handler still at work must not hold the rest.
            task = asyncio.create_task(self._lost_delivery(watch, msg.data))
            self._settling.add(task)
            task.add_done_callback(self._settling.discard)

        subject = advisory_subject(self.stream.name, watch.durable)
        self._advisories.append(await self.broker.connection.subscribe(subject, cb=on_advisory))

    async def _lost_delivery(self, watch: LostWatch, data: bytes) -> None:
        """A message of `watch`'s durable JetStream will not deliver again, though nobody
        settled it: given up on and dead-lettered as if its last attempt had raised."""
        durable = watch.durable
        try:
            advisory = MaxDeliveries.model_validate_json(data)
        except ValidationError as e:
            log.warning("%s: unreadable max-deliveries advisory: %s", durable, e)
            return
        sequence = advisory.stream_seq
        # The message may sit in this process fetched but not yet handled (a busy loop sent
        # no heartbeat): given a moment, it is being handled, or acked, rather than lost.
        await asyncio.sleep(min(self.settings.ack_wait_s, _LOST_GRACE_MAX_S))
        in_hand = self._handling.get((durable, sequence))
        if in_hand is not None and await asyncio.shield(in_hand):
            return  # this process's handler was slow, not lost: it acked at last
        if (durable, sequence) in self._acked:
            return  # handled here, acked after the ack wait (the process was paused)
        _remember(self._lost_given_up, (durable, sequence))
        try:
            stored = await self.js.get_msg(self.stream.name, seq=sequence)
        except NotFoundError:
            log.error("%s: message %d reached max_deliver and left the log", durable, sequence)
            return
        except Exception:  # the next advisory instance (or a restart's) may do better
            log.exception("%s: reading message %d given up on failed", durable, sequence)
            return
        subject, body = stored.subject or "", stored.data or b""
        headers = dict(stored.headers or {})
        origin = Origin(subject, sequence, advisory.deliveries)
        taken = self._take(sequence, subject, body, headers, durable, watch.event_type)
        if isinstance(taken, Refusal):  # never handled: a forgery ends no run either
            await self._store_dead_letter(body, origin, durable, taken.reason)
            if watch.on_refused is not None:
                await watch.on_refused(taken)
            return
        event, signer = taken
        reason = lost_reason(advisory.deliveries)
        log.error("%s: giving up on %s: %s", durable, event.event_id, reason)
        delivery = Delivery(sequence, advisory.deliveries, subject, headers, body, signer)
        await self._give_up(watch.on_give_up, event, delivery, durable, reason)
        await self._store_dead_letter(body, origin, durable, reason)

    async def _store_dead_letter(
        self, data: bytes, origin: Origin, durable: str, reason: str
    ) -> None:
        await store_dead_letter(
            self.broker, self.subjects.dlq(durable), self._dlq.name, data, origin, durable, reason
        )

    async def _dead_letter(self, raw: Msg, durable: str, reason: str) -> None:
        """Move a message to the dead-letter stream with its reason, then ack it."""
        await dead_letter(
            self.broker, self.subjects.dlq(durable), self._dlq.name, raw, durable, reason
        )

    async def dead_letters(self, durable: str) -> list[tuple[bytes, dict[str, str]]]:
        """Every dead letter of a consumer so far: (payload, headers)."""
        return await read_dead_letters(self.js, self.subjects.dlq(durable), self._dlq.name)
