"""The envelope every event carries, and how an event gets its deterministic id."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar, TypedDict

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from ._ids import Identifier, derive_id

if TYPE_CHECKING:  # the domain's models import the envelope (control declarations)
    from ._domain import BlobRef

__all__ = ["NO_RUN", "Event", "Producer", "RunEnvelope", "run_id_for", "same_run"]

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

    @classmethod
    def id_for(cls, *key: object) -> str:
        """The deterministic id of this event type caused by `key`: a retried publish of
        the same cause gets the same id, so the bus dedupes it."""
        return derive_id(cls.model_fields["event_type"].default, *key)

    # What each type contributes to the readers of the log lives on its model, so that a
    # new type touches its schema, its writer and the readers that act on it, no dispatch
    # table (issue #49). An unknown type contributes its name and no blob.

    def blob_refs(self) -> list[BlobRef]:
        """The blobs this event references, each with its role (`assay audit` checks them)."""
        return []

    def summary_line(self) -> str:
        """What happened, in one line a person can read (`assay audit`, the viewer's feed)."""
        return self.event_type

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


class RunEnvelope(TypedDict):
    """Envelope fields of an event about a run, as `same_run` gives them (typed, so that
    `Event(**same_run(e), ...)` is checked like any other keyword)."""

    campaign_id: str
    run_id: str | None
    task_id: str | None
    causation_id: str | None


def same_run(event: Event, *, cause: Event | None = None) -> RunEnvelope:
    """Envelope fields of an event about the same run as `event`, caused by `cause`
    (default: `event` itself): campaign, run, task and causation."""
    return RunEnvelope(
        campaign_id=event.campaign_id,
        run_id=event.run_id,
        task_id=event.task_id,
        causation_id=(cause or event).event_id,
    )
