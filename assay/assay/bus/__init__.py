"""The event bus: NATS JetStream through faststream, typed events in and out."""

from . import _stored  # noqa: F401  (first: stored messages are never NATS status messages)
from ._broker import dlq_stream, ensure_streams, event_stream, lost_stream, make_broker
from ._bus import Bus
from ._campaigns import read_campaign
from ._dead_letters import DEAD_DELIVERIES, DEAD_REASON, DEAD_SEQUENCE, DEAD_SUBJECT
from ._lost import MaxDeliveries, advisory_subject, lost_reason
from ._outages import publish_through_outages
from ._pulls import BatchPull, WorkerPull, waiting_aside
from ._records import Delivery, GiveUpSink, Published, Refusal, RefusalSink, Unchanged
from ._replay import (
    LoggedEvent,
    RawMessage,
    Skipped,
    decode_log,
    describe_skipped,
    messages_at,
    read_raw,
)
from ._requests import RequestServer
from ._subjects import Subjects
from ._subscribe import subscribe

__all__ = [
    "DEAD_DELIVERIES",
    "DEAD_REASON",
    "DEAD_SEQUENCE",
    "DEAD_SUBJECT",
    "BatchPull",
    "Bus",
    "Delivery",
    "GiveUpSink",
    "LoggedEvent",
    "MaxDeliveries",
    "Published",
    "RawMessage",
    "Refusal",
    "RefusalSink",
    "RequestServer",
    "Skipped",
    "Subjects",
    "Unchanged",
    "WorkerPull",
    "advisory_subject",
    "decode_log",
    "describe_skipped",
    "dlq_stream",
    "ensure_streams",
    "event_stream",
    "lost_reason",
    "lost_stream",
    "make_broker",
    "messages_at",
    "publish_through_outages",
    "read_campaign",
    "read_raw",
    "subscribe",
    "waiting_aside",
]
