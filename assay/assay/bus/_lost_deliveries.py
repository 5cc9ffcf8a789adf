"""`Bus`'s watch over lost last deliveries: a message JetStream will not deliver again,
though nobody settled it, is given up on and dead-lettered from JetStream's advisory.

The advisories are pulled from the stream that keeps them (`lost_stream`), by a durable
of the same name as the one they speak of, shared by its instances like its messages:
an advisory published while no instance was up (each killed, or the server restarting)
waits there for the next, where a core-NATS subscription heard it or lost it for good.
"""

from __future__ import annotations

import asyncio
import logging

from nats.aio.msg import Msg
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from assay.contract import lost_stream_name

from ._broker import inbox_of
from ._consuming import Consuming, _remember
from ._dead_letters import Origin, store_dead_letter
from ._lost import LostWatch, MaxDeliveries, advisory_subject, lost_reason
from ._pulls import WorkerPull
from ._records import Delivery, Refusal

__all__ = ["LostDeliveries"]

log = logging.getLogger("assay.bus")

_LOST_GRACE_MAX_S = 10.0
"""How long an advisory waits (at most; else the ack wait) for a delivery of its message
queued in this process to show up, before the message is taken as lost."""


_LOST_WORKERS = 32
"""Advisories of one durable handled at a time: each may wait on a handler still at work."""
_LOST_MAX_DELIVER = 20
"""Tries at one advisory (a failed read of its message is tried again an ack wait later)."""


class LostDeliveries(Consuming):
    """Given up on and dead-lettered: the lost last deliveries of `Bus`'s durables."""

    _lost_pulls: list[WorkerPull]

    def _watch_lost(self, watch: LostWatch) -> WorkerPull:
        """A pull of `watch`'s durable's max-deliveries advisories from the stream that
        keeps them; each advisory is acked once its message is given up (or was not lost)."""
        subject = advisory_subject(self.stream.name, watch.durable)
        config = ConsumerConfig(
            durable_name=watch.durable,
            ack_policy=JsAckPolicy.EXPLICIT,
            max_deliver=_LOST_MAX_DELIVER,
            ack_wait=self.settings.ack_wait_s,
            deliver_policy=DeliverPolicy.ALL,
            filter_subject=subject,
        )

        async def deliver(msg: Msg) -> None:
            await self._lost_delivery(watch, msg.data)
            await msg.ack()

        pull = WorkerPull(
            subject=subject,
            durable=watch.durable,
            stream=lost_stream_name(self.stream.name),
            config=config,
            max_workers=_LOST_WORKERS,
            batch_size=_LOST_WORKERS,
            ack_wait_s=self.settings.ack_wait_s,
            inbox_prefix=f"{inbox_of(self.settings)}.".encode(),
            deliver=deliver,
        )
        self._lost_pulls.append(pull)
        return pull

    async def _lost_delivery(self, watch: LostWatch, data: bytes) -> None:
        """A message of `watch`'s durable JetStream will not deliver again, though nobody
        settled it: given up on and dead-lettered as if its last attempt had raised. A
        failed read of the message raises (the advisory is delivered again)."""
        durable = watch.durable
        try:
            advisory = MaxDeliveries.model_validate_json(data)
        except ValidationError as e:  # nothing to try again: settled, and said
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
