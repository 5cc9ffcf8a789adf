"""Events of a campaign, its tasks and its sandboxes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ._cache import CacheSpec
from ._domain import AgentSpec, BlobRef, CampaignSpec, FileRef, Limits, Price, SandboxSpec, Task
from ._envelope import Event
from ._event_text import _n
from ._web import WebSpec

__all__ = [
    "CampaignStarted",
    "RejectionReason",
    "RunRequested",
    "SandboxReady",
    "TaskAccepted",
    "TaskRejected",
    "TaskSubmitted",
]


class CampaignStarted(Event):
    """A campaign was declared: agents, judges, rubric, epochs, limits, sandbox."""

    event_type: Literal["CampaignStarted"] = "CampaignStarted"
    written_by = ("cli",)
    campaign: CampaignSpec

    def summary_line(self) -> str:
        return f"campaign {self.campaign.name}"


class TaskSubmitted(Event):
    """A task joined a campaign. Attachments are already in the blob store."""

    event_type: Literal["TaskSubmitted"] = "TaskSubmitted"
    written_by = ("cli", "publisher")
    task: Task

    def summary_line(self) -> str:
        return f"task {self.task.task_id}"


class RunRequested(Event):
    """One (task, agent, epoch) should be run. Self-contained so workers need no fold."""

    event_type: Literal["RunRequested"] = "RunRequested"
    written_by = ("cli", "runner")
    task: Task
    agent: AgentSpec
    epoch: int = Field(ge=0)
    attempt: int = Field(default=0, ge=0)
    """0 for the first run of (task, agent, epoch); a retry after an infrastructure
    failure is attempt + 1 under a new run id."""
    limits: Limits
    sandbox: SandboxSpec
    scripted: bool = False
    prices: dict[str, Price] = Field(default_factory=dict)
    """The campaign's price overrides (model name or prefix -> USD per million tokens)."""
    web: WebSpec = Field(default_factory=WebSpec)
    """The campaign's web (its `web:` section) for this run's web tools."""
    cache: CacheSpec | None = None
    """The campaign's development cache (its `cache:` section); None: every answer is asked."""

    def blob_refs(self) -> list[BlobRef]:
        return [("attachment", f) for f in self.task.attachments]

    def summary_line(self) -> str:
        scripted = ", scripted" if self.scripted else ""
        return f"agent {self.agent.agent_id} ({self.agent.model}), epoch {self.epoch}{scripted}"


RejectionReason = Literal[
    "invalid", "unknown_campaign", "missing_blob", "blob_mismatch", "duplicate"
]


class TaskAccepted(Event):
    """The runner checked a submitted task (campaign, attachments, uniqueness) and
    scheduled its runs. Publishers subscribe to it for their campaign."""

    event_type: Literal["TaskAccepted"] = "TaskAccepted"
    written_by = ("runner",)
    submission: str = Field(
        description="The event_id of the TaskSubmitted this answers: a publisher matches "
        "its answer by it."
    )
    run_ids: list[str] = Field(default_factory=list)
    """The runs scheduled for the task (one per agent and epoch)."""


class TaskRejected(Event):
    """A submitted task was refused at the door, before any run was scheduled."""

    event_type: Literal["TaskRejected"] = "TaskRejected"
    written_by = ("runner",)
    submission: str | None = Field(
        default=None,
        description="The event_id of the TaskSubmitted this answers (null when the refused "
        "message had none): a publisher matches its answer by it.",
    )
    sequence: int = Field(default=0, ge=0)
    """Stream sequence of the refused message."""
    reason: RejectionReason
    detail: str


class SandboxReady(Event):
    """A fresh sandbox holds the task's attachments under /workspace."""

    event_type: Literal["SandboxReady"] = "SandboxReady"
    written_by = ("sandbox-manager",)
    sandbox_id: str
    backend: str
    instance: str
    """The sandbox-manager instance holding it; commands go to its RPC subjects."""
    image_digest: str
    """Digest of the runtime (Docker image id or rootfs recipe hash)."""
    workspace: list[FileRef]

    def blob_refs(self) -> list[BlobRef]:
        return [("workspace", f) for f in self.workspace]

    def summary_line(self) -> str:
        return (
            f"{self.backend} sandbox {self.sandbox_id}, {_n(len(self.workspace), 'workspace file')}"
        )
