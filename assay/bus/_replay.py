"""Reading the log back in order, as typed events, from any sequence."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import NamedTuple

from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from assay.schemas import Event, InvalidEvent, parse_event

__all__ = ["LoggedEvent", "RawMessage", "read_log", "read_raw"]

log = logging.getLogger("assay.bus.replay")


class RawMessage(NamedTuple):
    """A message as stored: sequence, subject, bytes, headers."""

    sequence: int
    subject: str
    data: bytes
    headers: dict[str, str]


class LoggedEvent(NamedTuple):
    """A typed event and its position in the log."""

    sequence: int
    event: Event


async def read_raw(
    js: JetStreamContext,
    stream: str,
    *,
    start: int = 1,
    subject: str,
    follow: bool = False,
    batch: int = 512,
) -> AsyncIterator[RawMessage]:
    """Yield stored messages in log order from `start`.

    Without `follow` it stops at the end of the log as it was when reading began;
    with `follow` it keeps waiting for new messages.
    """
    config = ConsumerConfig(
        ack_policy=AckPolicy.NONE,
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=max(1, start),
        inactive_threshold=60.0,
        max_ack_pending=-1,
    )
    # One ephemeral consumer with no acks delivers strictly in stream order.
    psub = await js.pull_subscribe(subject, stream=stream, config=config)
    try:
        remaining = (await psub.consumer_info()).num_pending
        while follow or remaining > 0:
            want = batch if follow else min(batch, remaining)
            try:
                msgs = await psub.fetch(want, timeout=1.0 if follow else 5.0)
            except NatsTimeout:
                if follow:
                    continue
                remaining = (await psub.consumer_info()).num_pending
                continue
            for m in msgs:
                meta = m.metadata
                remaining = meta.num_pending
                yield RawMessage(meta.sequence.stream, m.subject, m.data, dict(m.headers or {}))
    finally:
        try:
            await psub.unsubscribe()
        except Exception:  # the connection may already be closing
            log.debug("unsubscribe failed", exc_info=True)


async def read_log(
    js: JetStreamContext,
    stream: str,
    *,
    start: int = 1,
    subject: str,
    follow: bool = False,
) -> AsyncIterator[LoggedEvent]:
    """Yield typed events in log order; messages that are not valid events are skipped.

    Skipped messages were dead-lettered by the live consumers; a replay must not
    stop on them either.
    """
    async for raw in read_raw(js, stream, start=start, subject=subject, follow=follow):
        try:
            event = parse_event(raw.data, subject=raw.subject)
        except InvalidEvent as e:
            log.warning("replay skips sequence %d: %s", raw.sequence, e)
            continue
        yield LoggedEvent(raw.sequence, event)
