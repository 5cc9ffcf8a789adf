"""The dead-letter stream: where a message that cannot be handled goes, with its reason."""

from __future__ import annotations

from typing import NamedTuple

from faststream.nats import NatsBroker
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig

from assay_schemas import BusError

__all__ = [
    "DEAD_DELIVERIES",
    "DEAD_REASON",
    "DEAD_SEQUENCE",
    "DEAD_SUBJECT",
    "Origin",
    "dead_letter",
    "read_dead_letters",
    "store_dead_letter",
]

DEAD_REASON = "Assay-Dead-Reason"
DEAD_SUBJECT = "Assay-Dead-Subject"
DEAD_SEQUENCE = "Assay-Dead-Sequence"
DEAD_DELIVERIES = "Assay-Dead-Deliveries"


async def dead_letter(
    broker: NatsBroker, subject: str, stream: str, raw: Msg, durable: str, reason: str
) -> None:
    """Publish `raw` to the dead-letter `subject` with its reason and origin, then ack it."""
    meta = raw.metadata
    origin = Origin(raw.subject, meta.sequence.stream, meta.num_delivered)
    await store_dead_letter(broker, subject, stream, raw.data, origin, durable, reason)
    await raw.ack()


class Origin(NamedTuple):
    """Where a dead letter came from: its subject and sequence in the log, and how many
    times it was delivered."""

    subject: str
    sequence: int
    deliveries: int


async def store_dead_letter(
    broker: NatsBroker,
    subject: str,
    stream: str,
    data: bytes,
    origin: Origin,
    durable: str,
    reason: str,
) -> None:
    """Publish `data` to the dead-letter `subject` with its reason and origin.

    The message id is derived from the durable and the original sequence, so a retried
    dead-lettering (or another instance's, for a lost last delivery) is stored once.
    """
    headers = {
        "Nats-Msg-Id": f"dlq-{durable}-{origin.sequence}",
        DEAD_REASON: reason[:4000].replace("\r", " ").replace("\n", " "),
        DEAD_SUBJECT: origin.subject,
        DEAD_SEQUENCE: str(origin.sequence),
        DEAD_DELIVERIES: str(origin.deliveries),
    }
    await broker.publish(data, subject, headers=headers, stream=stream, timeout=10.0)


async def read_dead_letters(
    js: JetStreamContext, subject: str, stream: str
) -> list[tuple[bytes, dict[str, str]]]:
    """Every dead letter on `subject` so far: (payload, headers)."""
    out: list[tuple[bytes, dict[str, str]]] = []
    psub = await js.pull_subscribe(
        subject,
        stream=stream,
        config=ConsumerConfig(ack_policy=AckPolicy.NONE, inactive_threshold=30.0),
    )
    try:
        info = await psub.consumer_info()
        remaining = info.num_pending or 0
        while remaining > 0:
            for m in await psub.fetch(min(remaining, 256), timeout=5.0):
                out.append((m.data, dict(m.headers or {})))
                remaining -= 1
    except NatsTimeout as e:
        raise BusError(f"reading dead letters on {subject}: {e}") from e
    finally:
        await psub.unsubscribe()
    return out
