"""The envelope every event carries, and how an event gets its deterministic id."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from ._ids import Identifier, derive_id

__all__ = ["NO_RUN", "Event", "Producer", "new_event", "run_id_for", "same_run"]

NO_RUN = "-"
"""Subject token for events that belong to no run."""


class Producer(BaseModel):
    """Which service (and version) published an event."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    service: str
    version: str


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Event(BaseModel):
    """The envelope every event carries."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    written_by: ClassVar[tuple[str, ...]] = ()
    """The roles whose enrolled keys may sign this type (`assay.security.signing`). It lives
    on the schema because every verifier needs it, whichever services its image installs;
    the publishing services' contracts must agree (a test checks)."""

    event_id: str
    """Deterministic: derived from the cause, so retried publishes dedupe."""
    event_type: str
    schema_version: int = 1
    occurred_at: AwareDatetime = Field(default_factory=_utcnow)
    """UTC time the producer created the event."""
    campaign_id: Identifier
    run_id: Identifier | None = None
    task_id: Identifier | None = None
    causation_id: str | None = None
    """event_id of the event that caused this one."""
    producer: Producer

    @field_validator("occurred_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)


def run_id_for(campaign_id: str, task_id: str, agent_id: str, epoch: int, attempt: int = 0) -> str:
    """Deterministic run id: the same (task, agent, epoch, attempt) is scheduled once.

    The attempt is part of the identity: a retry is a new run, the failed one stays."""
    parts: tuple[object, ...] = (campaign_id, task_id, agent_id, epoch)
    if attempt:
        parts = (*parts, attempt)  # first attempts keep the ids they always had
    return "r" + derive_id("run", *parts)[:24]


E = TypeVar("E", bound=Event)


def new_event(cls: type[E], *, key: tuple[object, ...], **fields: Any) -> E:
    """Build an event whose id is derived from its type and `key` (the cause)."""
    event_type = cls.model_fields["event_type"].default
    return cls(event_id=derive_id(event_type, *key), **fields)


def same_run(event: Event, *, cause: Event | None = None) -> dict[str, Any]:
    """Envelope fields of an event about the same run as `event`, caused by `cause`
    (default: `event` itself): campaign, run, task and causation."""
    return {
        "campaign_id": event.campaign_id,
        "run_id": event.run_id,
        "task_id": event.task_id,
        "causation_id": (cause or event).event_id,
    }
