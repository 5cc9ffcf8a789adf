"""Events of an agent's run: its steps, its end, its failure."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ._domain import BlobRef, FileRef, Usage
from ._envelope import Event
from ._errors import ErrorInfo, FailureStage, with_error_info
from ._event_text import _n
from ._steps import ToolCallRecord, ToolResultRecord
from ._web import WebSource

SEALED_CHOICE_CHARS = 80
"""A sealed choice's length: a 12-byte nonce, 32 bytes of plan digest and a 16-byte tag,
base64url (60 bytes, so no padding)."""
SEALED_CHOICE_PATTERN = rf"^[A-Za-z0-9_-]{{{SEALED_CHOICE_CHARS}}}$"

__all__ = [
    "FINAL_MESSAGE_INLINE_CHARS",
    "SEALED_CHOICE_CHARS",
    "AgentFinished",
    "AgentStepLogged",
    "RunFailed",
    "StopReason",
]


def _web_refs(sources: list[WebSource]) -> list[BlobRef]:
    """A web answer's blobs: the text the agent read and the bytes received."""
    refs: list[BlobRef] = []
    for s in sources:
        name = s.url or s.request
        refs.append(("web_text", FileRef(path=name, sha256=s.text_sha256, size=s.text_size)))
        if s.body_sha256 is not None:
            refs.append(("web_body", FileRef(path=name, sha256=s.body_sha256, size=s.body_size)))
    return refs


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
    cached_answer: bool = False
    """The model's answer was served from the development cache (`cache:`), not asked
    again; its usage and cost are those of the call that was cached."""
    sealed_choice: str | None = Field(default=None, pattern=SEALED_CHOICE_PATTERN)
    """A model run's first step: which plan the run plays if it is a control, sealed
    under the deployment's controls secret (`assay.security.controls`); every model
    run's first step carries one of the same length (an agent's names no plan), so a
    reader without the secret tells no control by it."""

    def blob_refs(self) -> list[BlobRef]:
        outputs = [("tool_output", r.output_blob) for r in self.tool_results if r.output_blob]
        return outputs + [w for r in self.tool_results for w in _web_refs(r.sources)]

    def summary_line(self) -> str:
        calls = ", ".join(c.name for c in self.tool_calls) or "no tool call"
        errors = sum(r.is_error for r in self.tool_results)
        failed = f", {_n(errors, 'tool error')}" if errors else ""
        tokens = f"{self.usage.input_tokens} in / {self.usage.output_tokens} out tokens"
        model = "answer from the development cache" if self.cached_answer else "model"
        return f"step {self.step}: {calls}{failed}; {tokens}, {model} {self.latency_ms:.0f} ms"


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
