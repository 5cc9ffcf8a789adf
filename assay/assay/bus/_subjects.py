"""Subject layout. Events: `assay_schemas.event_subject`; everything else outside."""

from __future__ import annotations

from dataclasses import dataclass

from assay_schemas import NO_RUN, Event, event_subject, events_subject

__all__ = ["Subjects"]


@dataclass(frozen=True, kw_only=True)
class Subjects:
    """Every subject Assay uses, under one prefix (tests give each test its own)."""

    prefix: str = "assay"

    @property
    def events(self) -> str:
        """All event subjects (the event stream's filter)."""
        return events_subject(self.prefix)

    @property
    def dead_letters(self) -> str:
        """All dead-letter subjects (the DLQ stream's filter)."""
        return f"{self.prefix}.dlq.>"

    def event(self, event_type: str = "*", campaign_id: str = "*", run_id: str = "*") -> str:
        """Filter for events; `*` selects any value of that token."""
        return event_subject(self.prefix, event_type, campaign_id, run_id)

    def run(self, campaign_id: str, run_id: str) -> str:
        """Filter for every event of one run (what a request and a cancellation are
        conditioned on: the first of them on the log is the only one)."""
        return self.event("*", campaign_id, run_id)

    def of(self, event: Event) -> str:
        """Subject an event is published on."""
        return self.event(event.event_type, event.campaign_id, event.run_id or NO_RUN)

    def dlq(self, durable: str) -> str:
        """Where a consumer's dead letters go."""
        return f"{self.prefix}.dlq.{durable}"

    def rpc(self, service: str, operation: str) -> str:
        """Core-NATS request subject (outside the event log)."""
        return f"{self.prefix}.rpc.{service}.{operation}"
