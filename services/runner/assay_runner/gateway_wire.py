"""What the model gateway reads from and writes to its two APIs' bodies: usage, text and
tool calls of an answer; errors in each SDK's shape; an answer replayed as an SSE stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

from assay_schemas import ToolCallRecord, Usage

__all__ = ["Wire", "error_body", "finish_reason_of", "parse_answer", "provider_of", "sse_body"]

Wire = Literal["chat", "responses", "messages"]
"""OpenAI's chat completions and responses, Anthropic's messages."""


def provider_of(wire: Wire) -> str:
    """The provider whose API a wire format is."""
    return "anthropic" if wire == "messages" else "openai"


def finish_reason_of(wire: Wire, answer: dict[str, Any]) -> str:
    """Why the model stopped, in the API's own word ('' when the answer does not say)."""
    if wire == "chat":
        choices = answer.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        value = first.get("finish_reason") if isinstance(first, dict) else None
    else:
        value = answer.get("status" if wire == "responses" else "stop_reason")
    return value[:64] if isinstance(value, str) else ""


def parse_answer(wire: Wire, answer: dict[str, Any]) -> tuple[Usage, str, list[ToolCallRecord]]:
    """Usage, assistant text and tool calls of a chat completion, a response or a message."""
    u = answer.get("usage") or {}
    if wire == "responses":
        return _parse_response(answer, u)
    if wire == "chat":
        message = answer["choices"][0]["message"]
        calls = [
            ToolCallRecord(
                call_id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"]
            )
            for c in message.get("tool_calls") or []
        ]
        cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        usage = Usage(
            input_tokens=u.get("prompt_tokens", 0),
            output_tokens=u.get("completion_tokens", 0),
            cached_tokens=cached,
        )
        return usage, message.get("content") or "", calls
    blocks = answer["content"]
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    calls = [
        ToolCallRecord(call_id=b["id"], name=b["name"], arguments=json.dumps(b.get("input", {})))
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    cached = u.get("cache_read_input_tokens") or 0
    usage = Usage(
        input_tokens=u.get("input_tokens", 0) + cached,
        output_tokens=u.get("output_tokens", 0),
        cached_tokens=cached,
    )
    return usage, text, calls


def _parse_response(
    answer: dict[str, Any], u: dict[str, Any]
) -> tuple[Usage, str, list[ToolCallRecord]]:
    items = answer["output"]
    text = "".join(
        part.get("text", "")
        for item in items
        if item.get("type") == "message"
        for part in item.get("content") or []
        if part.get("type") == "output_text"
    )
    calls = [
        ToolCallRecord(call_id=i["call_id"], name=i["name"], arguments=i["arguments"])
        for i in items
        if i.get("type") == "function_call"
    ]
    usage = Usage(
        input_tokens=u.get("input_tokens", 0),
        output_tokens=u.get("output_tokens", 0),
        cached_tokens=(u.get("input_tokens_details") or {}).get("cached_tokens") or 0,
    )
    return usage, text, calls


def error_body(api: str, kind: str, message: str) -> bytes:
    """An error body in the shape the program's SDK expects."""
    if api == "anthropic":
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": kind, "code": kind}}).encode()


def sse_body(wire: Wire, answer: dict[str, Any], *, usage_chunk: bool) -> bytes:
    """A whole answer as the server-sent events its API streams (one delta per part).

    `usage_chunk`: OpenAI's stream_options.include_usage, a last chunk with the usage.
    """
    if wire == "chat":
        events = _openai_chunks(answer, usage_chunk)
    else:
        events = _responses(answer) if wire == "responses" else _anthropic(answer)
    body = b"".join(_event(name, data) for name, data in events)
    return body + b"data: [DONE]\n\n" if wire == "chat" else body


def _event(name: str | None, data: dict[str, Any]) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _openai_chunks(
    answer: dict[str, Any], usage_chunk: bool
) -> Iterator[tuple[str | None, dict[str, Any]]]:
    choice = answer["choices"][0]
    message = choice["message"]
    base = {k: answer.get(k) for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield None, chunk({"role": "assistant", "content": message.get("content") or ""})
    for i, call in enumerate(message.get("tool_calls") or []):
        yield None, chunk({"tool_calls": [{"index": i, **call}]})
    yield None, chunk({}, choice.get("finish_reason") or "stop")
    if usage_chunk:
        yield None, {**base, "choices": [], "usage": answer.get("usage")}


def _anthropic(answer: dict[str, Any]) -> Iterator[tuple[str | None, dict[str, Any]]]:
    usage = answer.get("usage") or {}
    start = {**answer, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 0}}
    yield "message_start", {"type": "message_start", "message": start}
    for i, block in enumerate(answer["content"]):
        empty, delta = _split(block)
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": i, "content_block": empty},
        )
        if delta is not None:
            yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    stop = {"stop_reason": answer.get("stop_reason"), "stop_sequence": answer.get("stop_sequence")}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": stop,
            "usage": {"output_tokens": usage.get("output_tokens", 0)},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _split(block: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A content block as its empty start and its one delta (other kinds start whole)."""
    if block.get("type") == "text":
        return {**block, "text": ""}, {"type": "text_delta", "text": block["text"]}
    if block.get("type") == "tool_use":
        partial = json.dumps(block.get("input", {}))
        return {**block, "input": {}}, {"type": "input_json_delta", "partial_json": partial}
    return block, None


def _responses(answer: dict[str, Any]) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """A response's stream: created, each output item with its text or arguments as one
    delta, completed (which holds the whole response, as the SDKs read it)."""
    events: list[dict[str, Any]] = [
        {
            "type": "response.created",
            "response": {**answer, "status": "in_progress", "output": []},
        }
    ]
    for index, item in enumerate(answer["output"]):
        events.extend(_response_item(index, item))
    events.append({"type": "response.completed", "response": answer})
    for number, event in enumerate(events):
        yield event["type"], {**event, "sequence_number": number}


def _response_item(index: int, item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    at = {"output_index": index}
    kind, item_id = item.get("type"), item.get("id")
    if kind == "function_call":
        arguments = item.get("arguments", "")
        yield {"type": "response.output_item.added", **at, "item": {**item, "arguments": ""}}
        yield {
            "type": "response.function_call_arguments.delta",
            **at,
            "item_id": item_id,
            "delta": arguments,
        }
        yield {
            "type": "response.function_call_arguments.done",
            **at,
            "item_id": item_id,
            "arguments": arguments,
        }
    elif kind == "message":
        yield {"type": "response.output_item.added", **at, "item": {**item, "content": []}}
        for c, part in enumerate(item.get("content") or []):
            yield from _response_part({**at, "item_id": item_id, "content_index": c}, part)
    else:
        yield {"type": "response.output_item.added", **at, "item": item}
    yield {"type": "response.output_item.done", **at, "item": item}


def _response_part(at: dict[str, Any], part: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if part.get("type") != "output_text":
        yield {"type": "response.content_part.added", **at, "part": part}
    else:
        text = part.get("text", "")
        yield {"type": "response.content_part.added", **at, "part": {**part, "text": ""}}
        yield {"type": "response.output_text.delta", **at, "delta": text, "logprobs": []}
        yield {"type": "response.output_text.done", **at, "text": text, "logprobs": []}
    yield {"type": "response.content_part.done", **at, "part": part}
