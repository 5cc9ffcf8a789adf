"""The dead-letter stream: where a message that cannot be handled goes, with its reason."""

from __future__ import annotations

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
    "dead_letter",
    "read_dead_letters",
]

DEAD_REASON = "Assay-Dead-Reason"
DEAD_SUBJECT = "Assay-Dead-Subject"
DEAD_SEQUENCE = "Assay-Dead-Sequence"
DEAD_DELIVERIES = "Assay-Dead-Deliveries"


async def dead_letter(
    broker: NatsBroker, subject: str, stream: str, raw: Msg, durable: str, reason: str
) -> None:
    """Publish `raw` to the dead-letter `subject` with its reason and origin, then ack it.

    The message id is derived from the durable and the original sequence, so a retried
    dead-lettering is stored once.
    """
    meta = raw.metadata
    headers = {
        "Nats-Msg-Id": f"dlq-{durable}-{meta.sequence.stream}",
        DEAD_REASON: reason[:4000].replace("\r", " ").replace("\n", " "),
        DEAD_SUBJECT: raw.subject,
        DEAD_SEQUENCE: str(meta.sequence.stream),
        DEAD_DELIVERIES: str(meta.num_delivered),
    }
    await broker.publish(raw.data, subject, headers=headers, stream=stream, timeout=10.0)
    await raw.ack()


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
