"""The normalized conversation: what the runner logs and what every provider translates.

All models are frozen pydantic models that round-trip through JSON, so a conversation can
be written to the event log and rebuilt from it exactly (see `messages_to_json`).
Nothing here holds a credential.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, field_validator

from assay_schemas import Usage

__all__ = [
    "AssistantMessage",
    "Completion",
    "ContentPart",
    "GenerationParams",
    "ImageMediaType",
    "ImagePart",
    "Message",
    "ModelStopReason",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolDefinition",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "messages_from_json",
    "messages_to_json",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


ImageMediaType = Literal["image/png", "image/jpeg"]
"""Image formats that every supported API accepts inline."""


class TextPart(_Frozen):
    """A piece of text inside a user or tool-result message."""

    type: Literal["text"] = "text"
    text: str


class ImagePart(_Frozen):
    """An inline image (base64), e.g. a plot a multimodal judge must look at."""

    type: Literal["image"] = "image"
    media_type: ImageMediaType
    data: str
    """Base64 of the image bytes (no `data:` prefix)."""

    @field_validator("data")
    @classmethod
    def _is_base64(cls, value: str) -> str:
        # Fail at the edge: a bad payload would otherwise surface as an opaque 400 later.
        try:
            base64.b64decode(value, validate=True)
        except binascii.Error as e:
            raise ValueError(f"image data is not valid base64: {e}") from e
        return value

    @classmethod
    def from_bytes(cls, raw: bytes, media_type: ImageMediaType) -> ImagePart:
        """Build an image part from raw PNG/JPEG bytes."""
        return cls(media_type=media_type, data=base64.b64encode(raw).decode("ascii"))


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]
"""One part of multimodal content."""


def _parts(value: Any) -> Any:
    # Plain strings are by far the common case; accept them and store one text part.
    if isinstance(value, str):
        return (TextPart(text=value),)
    return value


def _text_of(parts: Sequence[TextPart | ImagePart]) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextPart))


class SystemMessage(_Frozen):
    """Instructions from the platform to the model."""

    role: Literal["system"] = "system"
    text: str


class UserMessage(_Frozen):
    """A user turn: text and/or images. A plain string is accepted as `content`."""

    role: Literal["user"] = "user"
    content: tuple[ContentPart, ...]

    _coerce = field_validator("content", mode="before")(_parts)

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return _text_of(self.content)


class ToolCall(_Frozen):
    """A call the model asked for."""

    id: str
    """Provider-assigned id; the matching `ToolResultMessage.call_id` repeats it."""
    name: str
    arguments: str
    """Arguments as the JSON text the model produced (may be invalid JSON: models err)."""

    def parsed_arguments(self) -> dict[str, Any]:
        """Decode `arguments`; raises ValueError when they are not a JSON object."""
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError(f"tool call {self.id} arguments are not a JSON object")
        return value


class AssistantMessage(_Frozen):
    """A model turn: optional text plus the tool calls it made."""

    role: Literal["assistant"] = "assistant"
    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


class ToolResultMessage(_Frozen):
    """The result of one tool call, sent back to the model."""

    role: Literal["tool"] = "tool"
    call_id: str
    content: tuple[ContentPart, ...]
    is_error: bool = False

    _coerce = field_validator("content", mode="before")(_parts)

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return _text_of(self.content)


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolResultMessage,
    Field(discriminator="role"),
]
"""Any message of a conversation, tagged by `role`."""

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def messages_to_json(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Dump a conversation to JSON-ready dicts (for events and logs)."""
    dumped: list[dict[str, Any]] = _MESSAGES.dump_python(list(messages), mode="json")
    return dumped


def messages_from_json(data: Any) -> list[Message]:
    """Rebuild a conversation from what `messages_to_json` wrote (validates)."""
    if isinstance(data, str | bytes):
        return _MESSAGES.validate_json(data)
    return _MESSAGES.validate_python(data)


def _empty_schema() -> dict[str, JsonValue]:
    return {"type": "object", "properties": {}}


class ToolDefinition(_Frozen):
    """A tool offered to the model."""

    name: str
    description: str = ""
    parameters: dict[str, JsonValue] = Field(default_factory=_empty_schema)
    """JSON Schema of the arguments object."""


class GenerationParams(_Frozen):
    """Sampling and tool-use settings for one request."""

    max_tokens: int = 4096
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    """Only the OpenAI API honours a seed; ignored elsewhere."""
    tool_choice: Literal["auto", "required", "none"] = "auto"
    extra_body: dict[str, JsonValue] = Field(default_factory=dict)
    """Provider-specific body fields, passed through untouched."""
    cache_key: str | None = Field(
        default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$"
    )
    """Groups requests that share a prompt prefix (one campaign, agent and task; see
    `prompt_cache_key`); sent as OpenAI's `prompt_cache_key` when caching is on."""
    stable_messages: int = Field(default=0, ge=0)
    """How many leading messages every request with this cache key opens with (a judge's
    system prompt and case, before the run's evidence): an Anthropic breakpoint marks
    their end. OpenAI caches any shared prefix without one."""


ModelStopReason = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "content_filter", "other"
]
"""Why the model stopped, normalized across APIs."""


class Completion(_Frozen):
    """One model answer, normalized across APIs."""

    provider: str
    model: str
    """The model name the endpoint reported (falls back to the requested one)."""
    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: ModelStopReason = "end_turn"
    finish_reason: str = Field(default="", max_length=64)
    """Why the model stopped, as the API said it (``stop``, ``tool_calls``, ``end_turn``...)."""
    usage: Usage = Usage()
    latency_ms: float = 0.0
    """Wall time of the successful HTTP attempt."""
    elapsed_ms: float = 0.0
    """Wall time of the whole call: queueing for a slot, failed attempts and backoff."""
    attempts: int = 1
    response_id: str | None = None
    cached_answer: bool = False
    """Served from the development cache (`DevCached`), not asked of the model again."""

    def to_message(self) -> AssistantMessage:
        """The assistant turn to append to the conversation."""
        return AssistantMessage(text=self.text, tool_calls=self.tool_calls)
