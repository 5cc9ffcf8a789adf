"""`Bus`'s watch over lost last deliveries: a message JetStream will not deliver again,
though nobody settled it, is given up on and dead-lettered from JetStream's advisory."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nats.aio.msg import Msg
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from ._consuming import Consuming, _remember
from ._dead_letters import Origin, store_dead_letter
from ._lost import LostWatch, MaxDeliveries, advisory_subject, lost_reason
from ._records import Delivery, Refusal

__all__ = ["LostDeliveries"]

log = logging.getLogger("assay.bus")

_LOST_GRACE_MAX_S = 10.0
"""How long an advisory waits (at most; else the ack wait) for a delivery of its message
queued in this process to show up, before the message is taken as lost."""


class LostDeliveries(Consuming):
    """Given up on and dead-lettered: the lost last deliveries of `Bus`'s durables."""

    _advisories: list[Any]
    _settling: set[asyncio.Task[None]]

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
