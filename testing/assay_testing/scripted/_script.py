"""Scripts: what a scripted model answers, as plain Python over the normalized conversation."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from assay.providers import (
    AssistantMessage,
    Message,
    ModelStopReason,
    SystemMessage,
    ToolDefinition,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from assay_schemas import AssayError

__all__ = [
    "Script",
    "ScriptExhausted",
    "ScriptReply",
    "ScriptRequest",
    "ScriptedSequence",
    "ScriptedToolCall",
    "echo",
    "estimate_usage",
]

Api = Literal["openai", "anthropic"]


@dataclass(frozen=True, kw_only=True)
class ScriptRequest:
    """What a script sees: the request, already normalized (same models as the providers)."""

    api: Api
    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...]
    turn: int
    """Assistant turns already in the conversation: 0 for the first answer."""
    max_tokens: int | None = None
    body: dict[str, Any] = field(default_factory=dict, repr=False)
    """The raw JSON body, for scripts that check wire details."""

    @property
    def system(self) -> str:
        """All system text, joined."""
        return "\n\n".join(m.text for m in self.messages if isinstance(m, SystemMessage))

    @property
    def opening_text(self) -> str:
        """Text of the user messages before the first answer, joined (a judge's case:
        its shared part, then the run's evidence)."""
        opening = itertools.takewhile(lambda m: not isinstance(m, AssistantMessage), self.messages)
        return "\n\n".join(m.text for m in opening if isinstance(m, UserMessage))

    @property
    def last_user_text(self) -> str:
        """Text of the latest user message ("" if none)."""
        for m in reversed(self.messages):
            if isinstance(m, UserMessage):
                return m.text
        return ""

    @property
    def tool_results(self) -> tuple[ToolResultMessage, ...]:
        """Tool results sent since the last assistant turn."""
        out: list[ToolResultMessage] = []
        for m in reversed(self.messages):
            if isinstance(m, AssistantMessage):
                break
            if isinstance(m, ToolResultMessage):
                out.append(m)
        return tuple(reversed(out))


class ScriptedToolCall(BaseModel):
    """A tool call a script makes; the id is generated deterministically when omitted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    arguments: dict[str, JsonValue] | str = {}
    """An object (encoded for you) or raw text (to script invalid JSON on purpose)."""
    id: str | None = None


class ScriptReply(BaseModel):
    """What the scripted model answers: text and/or tool calls."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    usage: Usage | None = None
    """Reported usage; None means a deterministic estimate (about 4 characters a token)."""
    stop_reason: ModelStopReason | None = None
    """None means `tool_use` when there are tool calls, else `end_turn`."""

    @classmethod
    def say(cls, text: str, *, usage: Usage | None = None) -> ScriptReply:
        """A plain text answer."""
        return cls(text=text, usage=usage)

    @classmethod
    def call(
        cls,
        name: str,
        arguments: dict[str, JsonValue] | str | None = None,
        *,
        id: str | None = None,
        text: str | None = None,
    ) -> ScriptReply:
        """One tool call, optionally with some text before it."""
        call = ScriptedToolCall(name=name, arguments=arguments or {}, id=id)
        return cls(text=text, tool_calls=(call,))


Script = Callable[[ScriptRequest], ScriptReply | Awaitable[ScriptReply]]
"""A scripted model: may be sync or async; runs on the server's thread."""


class ScriptExhausted(AssayError, RuntimeError):
    """A `ScriptedSequence` was asked for a turn it has no reply for."""


ReplyLike = ScriptReply | str | Callable[[ScriptRequest], ScriptReply]


class ScriptedSequence:
    """Turn k of every conversation gets reply k: deterministic, whatever the interleaving.

    Entries may be a `ScriptReply`, a string (a text reply) or a callable for a turn that
    depends on the request (e.g. echoing a tool result).
    """

    def __init__(self, replies: Sequence[ReplyLike], *, repeat_last: bool = False) -> None:
        if not replies:
            raise ValueError("a ScriptedSequence needs at least one reply")
        self.replies = tuple(replies)
        self.repeat_last = repeat_last

    def __call__(self, request: ScriptRequest) -> ScriptReply:
        index = request.turn
        if index >= len(self.replies):
            if not self.repeat_last:
                raise ScriptExhausted(
                    f"script for {request.model!r} has {len(self.replies)} replies, "
                    f"asked for turn {index}"
                )
            index = len(self.replies) - 1
        reply = self.replies[index]
        if isinstance(reply, str):
            return ScriptReply(text=reply)
        if isinstance(reply, ScriptReply):
            return reply
        return reply(request)


def echo(request: ScriptRequest) -> ScriptReply:
    """Answer with the latest user text (a handy default script)."""
    return ScriptReply(text=request.last_user_text)


def estimate_usage(request_body: bytes, reply: ScriptReply) -> Usage:
    """Deterministic token estimate: about 4 characters a token, like real tokenizers on
    English; a call counts its name and its arguments' JSON, as the model wrote them."""
    out_chars = len(reply.text or "") + sum(
        len(c.name) + len(c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments))
        for c in reply.tool_calls
    )
    return Usage(
        input_tokens=max(1, math.ceil(len(request_body) / 4)),
        output_tokens=max(1, math.ceil(out_chars / 4)),
    )
