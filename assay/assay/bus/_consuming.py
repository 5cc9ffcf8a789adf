"""The consuming half of `Bus`: durable typed consumers, each delivery parsed, checked
against the trust list, handled and settled (acked, retried or dead-lettered)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from faststream.nats import ConsumerConfig, DeliverPolicy, JStream, NatsBroker
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy as JsAckPolicy
from opentelemetry import trace

from assay.config import Settings
from assay.security.signing import TrustList
from assay.telemetry import ServedSpan, extract_context, tracer
from assay_schemas import Event, InvalidEvent, Producer, SignatureRefused, Superseded, parse_event

from ._acks import Acks
from ._broker import inbox_of
from ._dead_letters import dead_letter
from ._lost import LostWatch
from ._outages import through_outages
from ._pacing import KeepAlive, backoff, heartbeat_s
from ._pulls import BatchPull, WorkerPull
from ._records import Delivery, GiveUpSink, Refusal, RefusalSink
from ._subjects import Subjects

__all__ = ["Consuming", "Handler"]

log = logging.getLogger("assay.bus")

E = TypeVar("E", bound=Event)

_KEPT = 4096
"""How many slow acks and lost deliveries `Bus` remembers per kind (a bound on memory;
an advisory comes an ack wait after its delivery)."""


def _remember(seen: dict[tuple[str, int], None], key: tuple[str, int]) -> None:
    """Add `key` to `seen`, forgetting the oldest beyond `_KEPT`."""
    seen[key] = None
    if len(seen) > _KEPT:
        del seen[next(iter(seen))]


Handler = Callable[[E, Delivery], Awaitable[None]]

_TRACER = tracer("assay.bus")
"""The bus's tracer, made once (each span still goes to the service it serves)."""


class Consuming:
    """The consumers `Bus` offers on top of its connection and the state `Bus.__init__` makes."""

    settings: Settings
    producer: Producer
    subjects: Subjects
    broker: NatsBroker
    stream: JStream
    _dlq: JStream
    _durables: list[str]
    _pulls: list[BatchPull | WorkerPull]
    _lost: dict[str, LostWatch]
    _acked: dict[tuple[str, int], None]
    _lost_given_up: dict[tuple[str, int], None]
    _handling: dict[tuple[str, int], asyncio.Future[bool]]
    _acks: Acks
    trust: TrustList | None

    @property
    def js(self) -> JetStreamContext:
        raise NotImplementedError

    # --- consuming ----------------------------------------------------------------------

    def consume_event(
        self, event_type: type[E], handler: Handler[E], *, durable: str, **options: Any
    ) -> WorkerPull | BatchPull:
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
    ) -> WorkerPull | BatchPull:
        """Register a durable pull consumer that hands typed events to `handler`.

        Delivery is explicit: success acks; a raise is retried with backoff until
        `max_deliver`, then handed to `on_give_up` and dead-lettered with its reason; a
        `Superseded` raise settles nothing (the delivery that took the work over does);
        messages that do not parse
        (or are not `event_type`, or disagree with their subject) are dead-lettered at
        once and reported to `on_refused`. The consumer never stops for one bad message.
        Instances that share `durable` share the work. Each message is handled in a task
        of its own (`WorkerPull`), at most `max_workers` at a time; a pull asks for what
        keeps `batch_size` messages in hand (default: one per worker): above `max_workers`,
        the rest wait their turn in log order, kept alive meanwhile.
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

            batches = BatchPull(
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
            self._pulls.append(batches)
            return batches

        pull = WorkerPull(
            subject=subject,
            durable=durable,
            stream=self.stream.name,
            config=config,
            max_workers=max_workers,
            batch_size=batch_size or max(1, max_workers),
            ack_wait_s=self.settings.ack_wait_s,
            inbox_prefix=inbox,
            deliver=deliver,
        )
        self._pulls.append(pull)
        return pull

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
                self._acks.ack(raw)
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
        span_name = f"{durable} handle {event.event_type}"
        ctx = extract_context(headers)
        with ServedSpan(self.producer.service, _TRACER, span_name, ctx) as span:
            span.set_attribute("assay.event_id", event.event_id)
            span.set_attribute("assay.run_id", event.run_id or "")
            delivery = Delivery(
                meta.sequence.stream, attempt, raw.subject, headers, raw.data, signer
            )
            try:
                await through_outages(handler, event, delivery, durable)
            except Superseded as e:
                # Another delivery of the message took the work over and settles it: an ack
                # here would drop it should that one die, a nak deliver it once more.
                log.warning(
                    "%s: %s left to the delivery that took it over (%s: %s)",
                    durable,
                    event.event_id,
                    type(e).__name__,
                    e,
                )
                return False
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
        self._acks.ack(raw)
        return True

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

    async def _dead_letter(self, raw: Msg, durable: str, reason: str) -> None:
        """Move a message to the dead-letter stream with its reason, then ack it."""
        await dead_letter(
            self.broker, self.subjects.dlq(durable), self._dlq.name, raw, durable, reason
        )
