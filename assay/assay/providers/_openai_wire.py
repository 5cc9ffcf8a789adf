"""Map the normalized conversation to and from the OpenAI chat-completions wire format.

Pure functions over JSON-shaped dicts: the provider uses the `to_*` direction, the
scripted server (and anyone rebuilding a conversation from raw requests) the `from_*` one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, cast

from openai.types.chat import ChatCompletion

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
    "OPENAI_STOP_REASONS",
    "completion_from_openai",
    "completion_from_openai_json",
    "from_openai_messages",
    "from_openai_tools",
    "to_openai_messages",
    "to_openai_tools",
]

OPENAI_STOP_REASONS: dict[str, ModelStopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "content_filter",
}

_DATA_URL = re.compile(r"^data:(?P<mt>image/(?:png|jpeg));base64,(?P<data>.*)$", re.DOTALL)


def _part_to_openai(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    url = f"data:{part.media_type};base64,{part.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_content(parts: Sequence[ContentPart]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return [_part_to_openai(p) for p in parts]


def to_openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Chat-completions `messages`.

    Tool messages can only carry text in this API, so images in tool results are sent in
    one user message right after the run of tool messages (a user message between two
    tool messages would be rejected).
    """
    out: list[dict[str, Any]] = []
    pending_images: list[dict[str, Any]] = []

    def flush_images() -> None:
        if pending_images:
            out.append({"role": "user", "content": list(pending_images)})
            pending_images.clear()

    for msg in messages:
        if not isinstance(msg, ToolResultMessage):
            flush_images()
        if isinstance(msg, SystemMessage):
            out.append({"role": "system", "content": msg.text})
        elif isinstance(msg, UserMessage):
            out.append({"role": "user", "content": _user_content(msg.content)})
        elif isinstance(msg, AssistantMessage):
            entry: dict[str, Any] = {"role": "assistant", "content": msg.text}
            if msg.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in msg.tool_calls
                ]
            out.append(entry)
        else:
            images = [p for p in msg.content if isinstance(p, ImagePart)]
            text = msg.text or ("(images follow)" if images else "")
            if msg.is_error:
                text = f"[tool error] {text}"
            out.append({"role": "tool", "tool_call_id": msg.call_id, "content": text})
            if images:
                pending_images.append(
                    {"type": "text", "text": f"Images returned by tool call {msg.call_id}:"}
                )
                pending_images.extend(_part_to_openai(p) for p in images)
    flush_images()
    return out


def to_openai_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Chat-completions `tools` (function tools)."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            },
        }
        for t in tools
    ]


def _parts_from_openai(content: Any) -> list[ContentPart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[ContentPart] = []
    for item in content:
        kind = item.get("type")
        if kind == "text":
            parts.append(TextPart(text=item["text"]))
        elif kind == "image_url":
            match = _DATA_URL.match(item["image_url"]["url"])
            if match is None:
                raise ValueError("only base64 PNG/JPEG data URLs are supported for images")
            mt = cast(Any, match["mt"])
            parts.append(ImagePart(media_type=mt, data=match["data"]))
        else:
            raise ValueError(f"unsupported content part type {kind!r}")
    return parts


def from_openai_messages(raw: Sequence[dict[str, Any]]) -> list[Message]:
    """Rebuild normalized messages from chat-completions request `messages`."""
    out: list[Message] = []
    for item in raw:
        role = item.get("role")
        if role in ("system", "developer"):
            text = "".join(
                p.text for p in _parts_from_openai(item["content"]) if isinstance(p, TextPart)
            )
            out.append(SystemMessage(text=text))
        elif role == "user":
            out.append(UserMessage(content=tuple(_parts_from_openai(item["content"]))))
        elif role == "assistant":
            parts = _parts_from_openai(item.get("content"))
            said = "".join(p.text for p in parts if isinstance(p, TextPart)) or None
            calls = tuple(
                ToolCall(
                    id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"]
                )
                for c in item.get("tool_calls") or ()
            )
            out.append(AssistantMessage(text=said, tool_calls=calls))
        elif role == "tool":
            content = tuple(_parts_from_openai(item["content"]))
            out.append(ToolResultMessage(call_id=item["tool_call_id"], content=content))
        else:
            raise ValueError(f"unsupported message role {role!r}")
    return out


def from_openai_tools(raw: Sequence[dict[str, Any]] | None) -> list[ToolDefinition]:
    """Rebuild tool definitions from chat-completions request `tools`."""
    out: list[ToolDefinition] = []
    for item in raw or ():
        fn = item["function"]
        out.append(
            ToolDefinition(
                name=fn["name"],
                description=fn.get("description") or "",
                parameters=fn.get("parameters") or {"type": "object", "properties": {}},
            )
        )
    return out


def completion_from_openai(resp: ChatCompletion, *, provider: str, model: str) -> Completion:
    """Normalize a chat completion.

    The SDK builds response objects without validation, so a body with missing fields
    surfaces here as AttributeError/KeyError/TypeError; the caller treats those as malformed.
    """
    choice = resp.choices[0]
    message = choice.message
    calls: list[ToolCall] = []
    for call in message.tool_calls or ():
        function = getattr(call, "function", None)
        if function is None:  # custom (non-function) tool calls are not offered by us
            continue
        calls.append(ToolCall(id=call.id, name=function.name, arguments=function.arguments))
    usage = resp.usage
    details = usage.prompt_tokens_details if usage is not None else None
    normalized = Usage(
        input_tokens=usage.prompt_tokens if usage is not None else 0,
        output_tokens=usage.completion_tokens if usage is not None else 0,
        cached_tokens=(details.cached_tokens or 0) if details is not None else 0,
    )
    stop = OPENAI_STOP_REASONS.get(str(choice.finish_reason), "other")
    if calls and stop == "end_turn":
        stop = "tool_use"  # some compatible servers say "stop" even when calling tools
    if not isinstance(resp.id, str):
        raise TypeError("response id is missing")
    return Completion(
        provider=provider,
        model=resp.model or model,
        text=message.content,
        tool_calls=tuple(calls),
        stop_reason=stop,
        finish_reason=str(choice.finish_reason or "")[:64],
        usage=normalized,
        response_id=resp.id,
    )


def completion_from_openai_json(body: bytes, *, provider: str, model: str) -> Completion:
    """Normalize a chat completion's raw JSON body, as `completion_from_openai` does the
    SDK's object (same fields, same defaults), without building the SDK's models.

    A body of the wrong shape raises ValueError/KeyError/TypeError/AttributeError/
    IndexError (field types are checked by our models); the caller treats those as
    malformed.
    """
    resp = json.loads(body)
    choice = resp["choices"][0]
    message = choice["message"]
    calls: list[ToolCall] = []
    for call in message.get("tool_calls") or ():
        function = call.get("function")
        if function is None:  # custom (non-function) tool calls are not offered by us
            continue
        calls.append(
            ToolCall(id=call["id"], name=function["name"], arguments=function["arguments"])
        )
    usage = resp.get("usage")
    details = usage.get("prompt_tokens_details") if usage is not None else None
    normalized = Usage(
        input_tokens=usage["prompt_tokens"] if usage is not None else 0,
        output_tokens=usage["completion_tokens"] if usage is not None else 0,
        cached_tokens=(details.get("cached_tokens") or 0) if details is not None else 0,
    )
    finish = choice.get("finish_reason")
    stop = OPENAI_STOP_REASONS.get(str(finish), "other")
    if calls and stop == "end_turn":
        stop = "tool_use"  # some compatible servers say "stop" even when calling tools
    if not isinstance(resp.get("id"), str):
        raise TypeError("response id is missing")
    return Completion(
        provider=provider,
        model=resp.get("model") or model,
        text=message.get("content"),
        tool_calls=tuple(calls),
        stop_reason=stop,
        finish_reason=str(finish or "")[:64],
        usage=normalized,
        response_id=resp["id"],
    )
