"""Subject layout. Events: assay.ev.<type>.<campaign>.<run>; everything else outside."""

from __future__ import annotations

__all__ = [
    "DLQ_STREAM_SUBJECTS",
    "EVENT_SUBJECTS",
    "RPC_PREFIX",
    "dlq_subject",
    "event_subject",
    "rpc_subject",
]

EVENT_SUBJECTS = "assay.ev.>"
DLQ_STREAM_SUBJECTS = "assay.dlq.>"
RPC_PREFIX = "assay.rpc"


def event_subject(event_type: str = "*", campaign_id: str = "*", run_id: str = "*") -> str:
    """Filter subject for events; `*` selects any value of that token."""
    return f"assay.ev.{event_type}.{campaign_id}.{run_id}"


def dlq_subject(durable: str) -> str:
    """Where a consumer's dead letters go."""
    return f"assay.dlq.{durable}"


def rpc_subject(service: str, operation: str) -> str:
    """Core-NATS request subject (not part of the event log)."""
    return f"{RPC_PREFIX}.{service}.{operation}"
