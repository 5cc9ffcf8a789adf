"""The event bus: NATS JetStream through faststream, typed events in and out."""

from ._broker import dlq_stream, ensure_streams, event_stream, make_broker
from ._bus import DEAD_REASON, Bus, Delivery, Published
from ._replay import LoggedEvent, RawMessage, read_log, read_raw
from ._subjects import EVENT_SUBJECTS, dlq_subject, event_subject, rpc_subject

__all__ = [
    "DEAD_REASON",
    "EVENT_SUBJECTS",
    "Bus",
    "Delivery",
    "LoggedEvent",
    "Published",
    "RawMessage",
    "dlq_stream",
    "dlq_subject",
    "ensure_streams",
    "event_stream",
    "event_subject",
    "make_broker",
    "read_log",
    "read_raw",
    "rpc_subject",
]
