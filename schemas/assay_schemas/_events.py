"""Events: immutable facts on the log, one model per type, one union to decode them."""

from __future__ import annotations

from typing import Annotated, get_args

from pydantic import Field

from ._controls import ControlDeclared
from ._envelope import Event
from ._events_agent import (
    FINAL_MESSAGE_INLINE_CHARS,
    SEALED_CHOICE_CHARS,
    AgentFinished,
    AgentStepLogged,
    RunFailed,
    StopReason,
)
from ._events_campaign import (
    CampaignStarted,
    RejectionReason,
    RunRequested,
    SandboxReady,
    TaskAccepted,
    TaskRejected,
    TaskSubmitted,
)
from ._events_judging import (
    CheckResult,
    DimensionScore,
    JudgeRegistered,
    JudgmentFailed,
    JudgmentRecorded,
)
from ._events_sealing import (
    SEAL_INLINE_BYTES,
    ArtifactsSealed,
    Exclusion,
    SealManifest,
)
from ._events_stopping import CampaignStopped, RunCancelled, StoppingFigure, StoppingReason

__all__ = [
    "EVENT_TYPES",
    "FINAL_MESSAGE_INLINE_CHARS",
    "SEALED_CHOICE_CHARS",
    "SEAL_INLINE_BYTES",
    "AgentFinished",
    "AgentStepLogged",
    "AnyEvent",
    "ArtifactsSealed",
    "CampaignStarted",
    "CampaignStopped",
    "CheckResult",
    "DimensionScore",
    "Exclusion",
    "JudgeRegistered",
    "JudgmentFailed",
    "JudgmentRecorded",
    "RejectionReason",
    "RunCancelled",
    "RunFailed",
    "RunRequested",
    "SandboxReady",
    "SealManifest",
    "StopReason",
    "StoppingFigure",
    "StoppingReason",
    "TaskAccepted",
    "TaskRejected",
    "TaskSubmitted",
]


AnyEvent = Annotated[
    CampaignStarted
    | TaskSubmitted
    | TaskAccepted
    | TaskRejected
    | RunRequested
    | SandboxReady
    | AgentStepLogged
    | AgentFinished
    | RunFailed
    | ArtifactsSealed
    | JudgeRegistered
    | JudgmentRecorded
    | JudgmentFailed
    | ControlDeclared
    | CampaignStopped
    | RunCancelled,
    Field(discriminator="event_type"),
]
"""Decodes any event by its `event_type` tag."""

EVENT_TYPES: dict[str, type[Event]] = {
    cls.model_fields["event_type"].default: cls for cls in get_args(get_args(AnyEvent)[0])
}
"""Every event model by its `event_type`, in the union's order (derived from `AnyEvent`, so
a new event type is listed once)."""
