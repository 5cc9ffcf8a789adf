"""Events of judging: judges registered, judgments recorded or failed."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._domain import BlobRef, FileRef, JudgeSpec, Usage
from ._envelope import Event
from ._errors import ErrorInfo, with_error_info
from ._event_text import _n
from ._ids import Identifier
from ._review import JudgeKind

__all__ = [
    "CheckResult",
    "DimensionScore",
    "JudgeRegistered",
    "JudgmentFailed",
    "JudgmentRecorded",
]


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
    cached_answer: bool = False
    """Every model answer of this sample was served from the development cache (`cache:`),
    not asked again: the verdict repeats an earlier one; its usage and cost are those of
    the calls that were cached."""

    def blob_refs(self) -> list[BlobRef]:
        rejected = self.rejected_outputs
        return [("judge_rejected_outputs", rejected)] if rejected is not None else []

    def summary_line(self) -> str:
        scores = [s.score for s in self.scores.values()]
        mean = f", mean {sum(scores) / len(scores):.2f}" if scores else ""
        checks = self.checks
        passed = f", {sum(c.passed for c in checks)}/{len(checks)} checks" if checks else ""
        tags = f"; tags {', '.join(self.failure_tags)}" if self.failure_tags else ""
        cached = "; answer from the development cache" if self.cached_answer else ""
        head = f"{self.judge_id}#{self.sample}: {_n(len(scores), 'score')}"
        return f"{head}{mean}{passed}{tags}{cached}"


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
