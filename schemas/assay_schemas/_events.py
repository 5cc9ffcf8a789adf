"""Events: immutable facts on the log, one model per type, one union to decode them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._controls import ControlDeclared
from ._domain import (
    AgentSpec,
    BlobRef,
    CampaignSpec,
    FileRef,
    JudgeSpec,
    Limits,
    Price,
    SandboxSpec,
    Task,
    Usage,
)
from ._envelope import Event
from ._errors import ErrorInfo, FailureStage, with_error_info
from ._ids import Identifier
from ._review import JudgeKind
from ._steps import ToolCallRecord, ToolResultRecord
from ._web import WebSource, WebSpec

__all__ = [
    "EVENT_TYPES",
    "FINAL_MESSAGE_INLINE_CHARS",
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

# --- campaign, tasks and sandboxes -----------------------------------------------------


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _web_refs(sources: list[WebSource]) -> list[BlobRef]:
    """A web answer's blobs: the text the agent read and the bytes received."""
    refs: list[BlobRef] = []
    for s in sources:
        name = s.url or s.request
        refs.append(("web_text", FileRef(path=name, sha256=s.text_sha256, size=s.text_size)))
        if s.body_sha256 is not None:
            refs.append(("web_body", FileRef(path=name, sha256=s.body_sha256, size=s.body_size)))
    return refs


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


# --- agent ------------------------------------------------------------------------------


class AgentStepLogged(Event):
    """One model turn with its tool calls and their results."""

    event_type: Literal["AgentStepLogged"] = "AgentStepLogged"
    written_by = ("runner",)
    schema_version: int = 2
    step: int = Field(ge=0)
    model_output: str = ""
    """Assistant text of this turn."""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    tool_results: list[ToolResultRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    latency_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    cost_usd: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    request_sha256: str | None = None
    """A program agent's model call: the request body as sent upstream (a blob)."""
    response_sha256: str | None = None
    """A program agent's model call: the upstream response body (a blob)."""

    def blob_refs(self) -> list[BlobRef]:
        outputs = [("tool_output", r.output_blob) for r in self.tool_results if r.output_blob]
        return outputs + [w for r in self.tool_results for w in _web_refs(r.sources)]

    def summary_line(self) -> str:
        calls = ", ".join(c.name for c in self.tool_calls) or "no tool call"
        errors = sum(r.is_error for r in self.tool_results)
        failed = f", {_n(errors, 'tool error')}" if errors else ""
        tokens = f"{self.usage.input_tokens} in / {self.usage.output_tokens} out tokens"
        return f"step {self.step}: {calls}{failed}; {tokens}, model {self.latency_ms:.0f} ms"


StopReason = Literal[
    "submitted", "model_stopped", "max_steps", "max_tokens", "wall_clock", "cost_budget"
]


FINAL_MESSAGE_INLINE_CHARS = 64 * 1024
"""An agent decides how long its answer is, and no event may exceed ``MAX_EVENT_BYTES``: a
longer final message is inlined as its prefix, the whole text stored as a blob."""


class AgentFinished(Event):
    """The agent stopped; the reason is always recorded."""

    event_type: Literal["AgentFinished"] = "AgentFinished"
    written_by = ("runner",)
    stop_reason: StopReason
    final_message: str
    final_message_truncated: bool = False
    """``final_message`` is only the start of the answer: the whole is ``final_message_blob``."""
    final_message_blob: FileRef | None = None
    """The whole final message (UTF-8), when it was too long to inline."""
    steps: int = Field(ge=0)
    usage: Usage
    cost_usd: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    duration_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    output_sha256: str | None = None
    """A program agent's stdout and stderr (a blob)."""

    def blob_refs(self) -> list[BlobRef]:
        blob = self.final_message_blob
        return [("final_message", blob)] if blob is not None else []

    def summary_line(self) -> str:
        return (
            f"{self.stop_reason} after {_n(self.steps, 'step')}, {self.duration_s:.1f} s, "
            f"{self.usage.input_tokens} in / {self.usage.output_tokens} out tokens, "
            f"${self.cost_usd:.4f}"
        )


class RunFailed(Event):
    """A run could not complete. Infrastructure failures are never scored."""

    event_type: Literal["RunFailed"] = "RunFailed"
    written_by = ("runner", "sandbox-manager")
    stage: FailureStage
    error: str
    """The error as one line, for people (what was logged; `error_info` is the data)."""
    error_info: ErrorInfo
    """The error as data (made from `error` on read for events logged before it existed)."""
    infrastructure: bool
    output_sha256: str | None = None
    """A program agent's stdout and stderr (a blob), when it ran."""

    @model_validator(mode="before")
    @classmethod
    def upgraded(cls, data: Any) -> Any:
        """Give an event logged before `error_info` existed the one its `error` meant."""
        return with_error_info(data)

    def summary_line(self) -> str:
        kind = "infrastructure" if self.infrastructure else "agent"
        return f"{self.stage} failed ({kind}): {self.error}"


# --- stopping early (#51) ---------------------------------------------------------------

StoppingReason = Literal["ranking_settled", "ci_width", "decided", "max_cost"]
"""Why a campaign stopped: its rule was met, or its ``max_cost_usd`` was spent."""


class StoppingFigure(BaseModel):
    """One anytime-valid interval the stopping rule read when it decided."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    kind: Literal["score", "pass_share", "difference"]
    """An agent's mean score (0-10), its pass share (0-1), or the paired difference
    ``agent_id − other`` in score points."""
    agent_id: str
    other: str | None = None
    """The agent compared with (``difference`` only)."""
    n: int = Field(ge=0)
    """Complete tasks the interval rests on."""
    estimate: float
    low: float
    high: float


class CampaignStopped(Event):
    """The campaign's ``stopping:`` rule was met (or its cost cap spent) after a wave: the
    runs not yet requested are cancelled. Decided from a prefix of the log, so a replay
    decides the same at the same sequence; its id derives from the campaign id."""

    event_type: Literal["CampaignStopped"] = "CampaignStopped"
    written_by = ("aggregator",)
    reason: StoppingReason
    settled: bool
    """The rule itself was met (False: only ``max_cost_usd`` stopped it)."""
    leader: str | None = None
    """The agent with the highest mean score when it stopped."""
    figures: list[StoppingFigure] = Field(default_factory=list)
    """The intervals the rule read (score and pass share per agent; the leader's
    differences under ``ranking_settled``)."""
    decided_at_sequence: int = Field(ge=1)
    """The log sequence of the event after which the rule was met."""
    cost_usd: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    """What the campaign had spent by then (agents and judges)."""
    warnings: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        settled = "" if self.settled else ", not settled"
        leader = f", {self.leader} leads" if self.leader else ""
        return f"stopped: {self.reason}{settled}{leader} (at seq {self.decided_at_sequence})"


class RunCancelled(Event):
    """A planned run never requested: its campaign stopped. An ending of its own, never a
    failure (nothing ran); a run already requested is never cancelled."""

    event_type: Literal["RunCancelled"] = "RunCancelled"
    written_by = ("runner",)
    agent_id: str
    epoch: int = Field(ge=0)
    reason: Literal["campaign_stopped"] = "campaign_stopped"

    def summary_line(self) -> str:
        return f"cancelled ({self.reason}): agent {self.agent_id}, epoch {self.epoch}"


# --- sealing ----------------------------------------------------------------------------


class Exclusion(BaseModel):
    """A workspace entry that was not sealed, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    reason: str


SEAL_INLINE_BYTES = 256 * 1024
"""A seal manifest (files + exclusions) larger than this, encoded, goes to the blob store."""


class SealManifest(BaseModel):
    """What a seal holds and leaves out: inline in the event, or a blob it references."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    files: list[FileRef] = Field(default_factory=list)
    excluded: list[Exclusion] = Field(default_factory=list)


class ArtifactsSealed(Event):
    """Every file the run left in /workspace, content-addressed and immutable.

    An agent decides how many files it leaves, so a manifest over ``SEAL_INLINE_BYTES``
    is stored as a blob referenced by ``manifest`` (``files``/``excluded`` then empty):
    read the seal only through ``resolved`` so that both forms look the same.
    """

    event_type: Literal["ArtifactsSealed"] = "ArtifactsSealed"
    written_by = ("sandbox-manager",)
    files: list[FileRef]
    excluded: list[Exclusion] = Field(default_factory=list)
    manifest: FileRef | None = None
    """The blob holding the whole SealManifest, when it was too large to inline."""
    file_count: int | None = Field(default=None, ge=0)
    """How many files the seal holds (set with ``manifest``; else ``len(files)``)."""
    final_message: str = ""
    final_message_truncated: bool = False
    """Copied from AgentFinished: ``final_message`` is a prefix of ``final_message_blob``."""
    final_message_blob: FileRef | None = None
    """Copied from AgentFinished: the whole final message, when too long to inline."""
    agent_id: Identifier
    epoch: int = Field(ge=0)
    sandbox_id: str = ""
    outcome: Literal["finished", "failed"] = "finished"

    @property
    def n_files(self) -> int:
        """Files in the seal, whichever form it has."""
        return self.file_count if self.file_count is not None else len(self.files)

    def resolved(self, load: Callable[[str], bytes]) -> ArtifactsSealed:
        """This seal with its manifest inline (``load`` reads a blob by sha256, verified)."""
        if self.manifest is None:
            return self
        full = SealManifest.model_validate_json(load(self.manifest.sha256))
        return self.model_copy(update={"files": full.files, "excluded": full.excluded})

    def blob_refs(self) -> list[BlobRef]:
        manifest = [("seal_manifest", self.manifest)] if self.manifest is not None else []
        blob = self.final_message_blob
        answer = [("final_message", blob)] if blob is not None else []
        return manifest + answer + [("artifact", f) for f in self.files]

    def summary_line(self) -> str:
        excluded = f", {len(self.excluded)} excluded" if self.excluded else ""
        return f"{self.outcome}: {_n(len(self.files), 'file')} sealed{excluded}"


# --- judging ----------------------------------------------------------------------------


class JudgeRegistered(Event):
    """A judge joined (or re-joined) the jury."""

    event_type: Literal["JudgeRegistered"] = "JudgeRegistered"
    written_by = ("judge",)
    judge: JudgeSpec

    def summary_line(self) -> str:
        return f"judge {self.judge.judge_id}"


class DimensionScore(BaseModel):
    """A judge's integer score on one rubric dimension, with its reason."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    score: int = Field(strict=True, ge=0, le=10)
    """An integer 0-10; booleans, floats and text are refused, never coerced."""
    reason: str = ""


class CheckResult(BaseModel):
    """One deterministic check of the rule judge."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    passed: bool
    detail: str = ""
    weight: float = 1.0


class JudgmentRecorded(Event):
    """One sample of one judge's verdict on one sealed run."""

    event_type: Literal["JudgmentRecorded"] = "JudgmentRecorded"
    written_by = ("judge", "reviewer")
    judge_id: Identifier
    judge_kind: JudgeKind = "machine"
    judge_family: str = ""
    judge_model: str = ""
    sample: int = Field(ge=0)
    rubric_id: str
    rubric_version: int
    scores: dict[str, DimensionScore] = Field(default_factory=dict)
    """Per rubric dimension. Empty for the rule judge, which records checks and tags."""
    failure_tags: list[str] = Field(default_factory=list)
    rationale: str = ""
    files_cited: list[str] = Field(default_factory=list)
    """Files the judge says it relied on."""
    files_opened: list[str] = Field(default_factory=list)
    """Files the judge actually opened through its tools (observed)."""
    checks: list[CheckResult] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    attempts: int = Field(default=1, ge=1)
    """Outputs the judge produced for this sample: 1 + the rejected ones it repaired."""
    rejected_outputs: FileRef | None = None
    """The rejected outputs and their problems, kept as a blob (None when none was)."""

    def blob_refs(self) -> list[BlobRef]:
        rejected = self.rejected_outputs
        return [("judge_rejected_outputs", rejected)] if rejected is not None else []

    def summary_line(self) -> str:
        scores = [s.score for s in self.scores.values()]
        mean = f", mean {sum(scores) / len(scores):.2f}" if scores else ""
        checks = self.checks
        passed = f", {sum(c.passed for c in checks)}/{len(checks)} checks" if checks else ""
        tags = f"; tags {', '.join(self.failure_tags)}" if self.failure_tags else ""
        return f"{self.judge_id}#{self.sample}: {_n(len(scores), 'score')}{mean}{passed}{tags}"


class JudgmentFailed(Event):
    """A judge gave no valid verdict after its repairs."""

    event_type: Literal["JudgmentFailed"] = "JudgmentFailed"
    written_by = ("judge",)
    judge_id: Identifier
    sample: int = Field(ge=0)
    error: str
    """The error as one line, for people (what was logged; `error_info` is the data)."""
    error_info: ErrorInfo
    """The error as data (made from `error` on read for events logged before it existed)."""
    attempts: int = Field(ge=1)
    raw_output: FileRef | None = None
    """The last raw output, kept as a blob for inspection."""
    infrastructure: bool = False

    @model_validator(mode="before")
    @classmethod
    def upgraded(cls, data: Any) -> Any:
        """Give an event logged before `error_info` existed the one its `error` meant."""
        return with_error_info(data)

    def blob_refs(self) -> list[BlobRef]:
        raw = self.raw_output
        return [("judge_raw_output", raw)] if raw is not None else []

    def summary_line(self) -> str:
        return f"{self.judge_id}#{self.sample}: {self.error} ({_n(self.attempts, 'attempt')})"


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
