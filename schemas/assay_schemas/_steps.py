"""What an agent step's tool calls were and what each returned to the model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ._domain import FileRef
from ._web import WebSource

__all__ = ["ToolCallRecord", "ToolResultRecord"]


class ToolCallRecord(BaseModel):
    """A tool call as the model made it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    name: str
    arguments: str
    """Raw JSON arguments as the model wrote them (may be invalid)."""


class ToolResultRecord(BaseModel):
    """What a tool call returned to the model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    name: str
    output: str
    """Output as shown to the model (possibly truncated with a marker)."""
    is_error: bool = False
    truncated: bool = False
    output_blob: FileRef | None = None
    """The whole output, when it was truncated for the model."""
    duration_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    exit_code: int | None = None
    sources: list[WebSource] = Field(default_factory=list, max_length=64)
    """Web answers this call received (web_search, web_fetch): the run's sources."""
