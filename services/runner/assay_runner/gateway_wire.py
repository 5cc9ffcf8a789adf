"""What the model gateway reads from and writes to its two APIs' bodies: usage, text and
tool calls of an answer; errors in each SDK's shape; an answer replayed as an SSE stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from assay_schemas import ToolCallRecord, Usage

__all__ = ["error_body", "parse_answer", "sse_body"]


def parse_answer(api: str, answer: dict[str, Any]) -> tuple[Usage, str, list[ToolCallRecord]]:
    """Usage, assistant text and tool calls of a chat completion or a message."""
    u = answer.get("usage") or {}
    if api == "openai":
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


def error_body(api: str, kind: str, message: str) -> bytes:
    """An error body in the shape the program's SDK expects."""
    if api == "anthropic":
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": kind, "code": kind}}).encode()


def sse_body(api: str, answer: dict[str, Any], *, usage_chunk: bool) -> bytes:
    """A whole answer as the server-sent events its API streams (one delta per part).

    `usage_chunk`: OpenAI's stream_options.include_usage, a last chunk with the usage.
    """
    events = _openai_chunks(answer, usage_chunk) if api == "openai" else _anthropic(answer)
    return b"".join(_event(name, data) for name, data in events) + (
        b"data: [DONE]\n\n" if api == "openai" else b""
    )


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
