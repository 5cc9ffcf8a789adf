"""Deliveries JetStream stopped redelivering with no handler to say so: the last one lost.

The bus dead-letters a message when its handler raises on the last attempt. When that
last delivery is lost instead (its consumer killed, or paused past the ack wait),
JetStream never hands the message out again and tells nobody but its advisory subject
`$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<durable>`. Every instance of a
service watches its durables' advisories (core NATS: each instance gets every one; the
dead letter's and the run's end have deterministic ids, so a second handling is stored once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from pydantic import BaseModel, ConfigDict

from assay.contract import advisory_subject

from ._records import GiveUpSink, RefusalSink

if TYPE_CHECKING:
    from assay_schemas import Event

__all__ = ["LostWatch", "MaxDeliveries", "advisory_subject", "lost_reason"]


class MaxDeliveries(BaseModel):
    """JetStream's advisory that a message reached its consumer's max_deliver unsettled
    (`io.nats.jetstream.advisory.v1.max_deliver`); only the fields the bus reads."""

    model_config = ConfigDict(extra="ignore")

    stream: str
    consumer: str
    stream_seq: int
    deliveries: int


def lost_reason(deliveries: int) -> str:
    """The dead letter's reason for a message whose last delivery was never settled."""
    return f"last delivery lost: {deliveries} deliveries"


class LostWatch(NamedTuple):
    """What one durable's lost last deliveries are handled with: the same as its handler's
    last failed attempt (the type it takes, where refusals and give-ups are told)."""

    durable: str
    event_type: type[Event] | tuple[type[Event], ...]
    on_refused: RefusalSink | None
    on_give_up: GiveUpSink | None
