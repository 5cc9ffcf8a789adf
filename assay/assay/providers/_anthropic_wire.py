"""Map the normalized conversation to and from the Anthropic messages wire format.

Pure functions over JSON-shaped dicts, used by the provider (`to_*`) and by the scripted
server (`from_*`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from anthropic.types import Message as AnthropicMessage

from ._models import (
    AssistantMessage,
    Completion,
    ContentPart,
    ImagePart,
    Message,
    ModelStopReason,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = [
    "ANTHROPIC_STOP_REASONS",
    "AnthropicPrompt",
    "completion_from_anthropic",
    "from_anthropic_messages",
    "from_anthropic_tools",
    "to_anthropic_prompt",
    "to_anthropic_tools",
]

ANTHROPIC_STOP_REASONS: dict[str, ModelStopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
}


class AnthropicPrompt(NamedTuple):
    """The `system` and `messages` parameters of a messages request."""

    system: str | None
    messages: list[dict[str, Any]]


def _part_to_anthropic(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
    }


def _tool_input(arguments: str) -> dict[str, Any]:
    # The API wants an object; keep a model's invalid JSON visible rather than dropping it.
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"_invalid_arguments": arguments}
    return value if isinstance(value, dict) else {"_invalid_arguments": arguments}


def to_anthropic_prompt(messages: Sequence[Message]) -> AnthropicPrompt:
    """Messages-API `system` + `messages`.

    System messages are joined into the `system` parameter (this API has no system role).
    Tool results become `tool_result` blocks of a user turn; consecutive user-side
    messages are merged, since turns must alternate.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for msg in messages:
        if isinstance(msg, SystemMessage):
            system.append(msg.text)
        elif isinstance(msg, UserMessage):
            add("user", [_part_to_anthropic(p) for p in msg.content])
        elif isinstance(msg, AssistantMessage):
            blocks: list[dict[str, Any]] = []
            if msg.text:
                blocks.append({"type": "text", "text": msg.text})
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)}
                for c in msg.tool_calls
            )
            add("assistant", blocks)
        else:
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": msg.call_id,
                "content": [_part_to_anthropic(p) for p in msg.content],
            }
            if msg.is_error:
                block["is_error"] = True
            add("user", [block])
    return AnthropicPrompt("\n\n".join(system) if system else None, out)


def to_anthropic_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Messages-API `tools` (client tools)."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def _parts_from_anthropic(content: Any) -> list[ContentPart]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[ContentPart] = []
    for block in content or ():
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(text=block["text"]))
        elif kind == "image":
            source = block["source"]
            if source.get("type") != "base64":
                raise ValueError("only base64 image sources are supported")
            parts.append(ImagePart(media_type=source["media_type"], data=source["data"]))
        else:
            raise ValueError(f"unsupported content block type {kind!r}")
    return parts


def from_anthropic_messages(system: Any, raw: Sequence[dict[str, Any]]) -> list[Message]:
    """Rebuild normalized messages from a messages request's `system` and `messages`."""
    out: list[Message] = []
    if system:
        parts = _parts_from_anthropic(system)
        out.append(SystemMessage(text="".join(p.text for p in parts if isinstance(p, TextPart))))
    for item in raw:
        role = item.get("role")
        content = item["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if role == "assistant":
            text = "".join(b["text"] for b in blocks if b["type"] == "text") or None
            calls = tuple(
                ToolCall(id=b["id"], name=b["name"], arguments=json.dumps(b["input"]))
                for b in blocks
                if b["type"] == "tool_use"
            )
            out.append(AssistantMessage(text=text, tool_calls=calls))
        elif role == "user":
            pending: list[dict[str, Any]] = []
            for b in blocks:
                if b["type"] == "tool_result":
                    if pending:
                        out.append(UserMessage(content=tuple(_parts_from_anthropic(pending))))
                        pending = []
                    out.append(
                        ToolResultMessage(
                            call_id=b["tool_use_id"],
                            content=tuple(_parts_from_anthropic(b.get("content", ""))),
                            is_error=bool(b.get("is_error", False)),
                        )
                    )
                else:
                    pending.append(b)
            if pending:
                out.append(UserMessage(content=tuple(_parts_from_anthropic(pending))))
        else:
            raise ValueError(f"unsupported message role {role!r}")
    return out


def from_anthropic_tools(raw: Sequence[dict[str, Any]] | None) -> list[ToolDefinition]:
    """Rebuild tool definitions from a messages request's `tools`."""
    return [
        ToolDefinition(
            name=t["name"],
            description=t.get("description") or "",
            parameters=t.get("input_schema") or {"type": "object", "properties": {}},
        )
        for t in raw or ()
    ]


def completion_from_anthropic(resp: AnthropicMessage, *, provider: str, model: str) -> Completion:
    """Normalize a messages response.

    `input_tokens` here counts all input: the API reports uncached, cache-read and
    cache-write tokens apart (none inside another); the cache reads are `cached_tokens`,
    the writes `cache_write_tokens`. A negative count is refused by `Usage`.
    """
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in resp.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input)))
    u = resp.usage
    cache_read = u.cache_read_input_tokens or 0
    cache_write = u.cache_creation_input_tokens or 0
    usage = Usage(
        input_tokens=u.input_tokens + cache_read + cache_write,
        output_tokens=u.output_tokens,
        cached_tokens=cache_read,
        cache_write_tokens=cache_write,
    )
    if not isinstance(resp.id, str):
        raise TypeError("response id is missing")
    return Completion(
        provider=provider,
        model=resp.model or model,
        text="".join(texts) if texts else None,
        tool_calls=tuple(calls),
        stop_reason=ANTHROPIC_STOP_REASONS.get(str(resp.stop_reason), "other"),
        finish_reason=str(resp.stop_reason or "")[:64],
        usage=usage,
        response_id=resp.id,
    )
