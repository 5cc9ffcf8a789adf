"""Wire bodies of the scripted server: requests in, replies and errors out, for both APIs."""

from __future__ import annotations

import hashlib
import json
import string
import time
from typing import Any

from assay.providers import (
    AssistantMessage,
    ModelStopReason,
    Usage,
    from_anthropic_messages,
    from_anthropic_tools,
    from_openai_messages,
    from_openai_tools,
)

from ._script import Api, ScriptReply, ScriptRequest

__all__ = ["error_body", "malformed_body", "parse_request", "reply_body"]

_OPENAI_FINISH: dict[ModelStopReason, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "content_filter": "content_filter",
    "other": "stop",
}
_ANTHROPIC_STOP: dict[ModelStopReason, str] = {
    "end_turn": "end_turn",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "content_filter": "refusal",
    "other": "pause_turn",
}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def parse_request(api: Api, body: dict[str, Any]) -> ScriptRequest:
    """Normalize a request body; raises KeyError/ValueError/TypeError when it is invalid."""
    if api == "openai":
        messages = from_openai_messages(body["messages"])
        tools = from_openai_tools(body.get("tools"))
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    else:
        messages = from_anthropic_messages(body.get("system"), body["messages"])
        tools = from_anthropic_tools(body.get("tools"))
        max_tokens = body.get("max_tokens")
    turn = sum(isinstance(m, AssistantMessage) for m in messages)
    return ScriptRequest(
        api=api,
        model=str(body["model"]),
        messages=tuple(messages),
        tools=tuple(tools),
        turn=turn,
        max_tokens=max_tokens,
        body=body,
    )


_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
_CALL_IDS = {"openai": ("call_", 24), "anthropic": ("toolu_01", 22)}
"""Each API's tool-call ids: a prefix, then random letters and digits."""


def call_id(request: ScriptRequest, index: int, salt: str = "") -> str:
    """The id of the `index`-th call of the reply to `request`, shaped as the API's own
    and drawn from the conversation so far (its messages, not the request's other
    fields): each conversation's own, as an API's ids are each call's, and the same bytes
    for the same conversation (a rerun, a judge's case read twice). `salt` tells apart
    conversations that are the same so far but that a script must know apart."""
    prefix, n = _CALL_IDS[request.api]
    said = json.dumps(
        [request.body.get("system"), request.body.get("messages")], sort_keys=True, default=str
    )
    seed = f"{request.model}\x1f{request.turn}\x1f{index}\x1f{salt}\x1f{said}"
    digest = hashlib.sha256(seed.encode()).digest()
    number = int.from_bytes(digest, "big")
    out = []
    for _ in range(n):
        number, digit = divmod(number, 62)
        out.append(_BASE62[digit])
    return prefix + "".join(out)


def _arguments(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def reply_body(
    request: ScriptRequest, reply: ScriptReply, usage: Usage, response_id: str
) -> dict[str, Any]:
    """A successful response in the request's API format."""
    stop: ModelStopReason = reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")
    if request.api == "openai":
        calls = [
            {
                "id": c.id or call_id(request, i),
                "type": "function",
                "function": {"name": c.name, "arguments": _arguments(c.arguments)},
            }
            for i, c in enumerate(reply.tool_calls)
        ]
        message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": response_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": _OPENAI_FINISH[stop],
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": usage.input_tokens,
                "completion_tokens": usage.output_tokens,
                "total_tokens": usage.input_tokens + usage.output_tokens,
                "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
            },
        }
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for i, c in enumerate(reply.tool_calls):
        args = c.arguments
        if isinstance(args, str):
            # tool_use input must be an object on this API; keep invalid text visible.
            try:
                args = json.loads(args)
            except ValueError:
                args = {"_invalid_arguments": args}
        content.append(
            {
                "type": "tool_use",
                "id": c.id or call_id(request, i),
                "name": c.name,
                "input": args,
            }
        )
    return {
        "id": response_id,
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": content,
        "stop_reason": _ANTHROPIC_STOP[stop],
        "stop_sequence": None,
        "usage": {
            # This API counts cache reads and writes apart from (not inside) input_tokens.
            "input_tokens": usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_input_tokens": usage.cached_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens,
        },
    }


def error_body(api: Api, status: int, message: str) -> dict[str, Any]:
    """An error body shaped like the real API's."""
    if api == "openai":
        kind = "rate_limit_exceeded" if status == 429 else "invalid_request_error"
        if status >= 500:
            kind = "server_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}
    kind = _ANTHROPIC_ERROR_TYPES.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
    return {"type": "error", "error": {"type": kind, "message": message}}


def malformed_body(api: Api, kind: str) -> bytes:
    """A 200 body that no client can use: truncated JSON, or valid JSON missing fields."""
    if kind == "invalid_json":
        return b'{"id": "broken", "choices": [{"message": '
    if kind == "contradictory_usage":
        return json.dumps(_contradictory(api)).encode()
    if api == "openai":
        return json.dumps({"id": "broken", "object": "chat.completion"}).encode()
    return json.dumps({"id": "broken", "type": "message"}).encode()


def _contradictory(api: Api) -> dict[str, Any]:
    """A well-formed answer whose usage cannot be: more read from cache than was sent
    (OpenAI), a negative uncached count (Anthropic)."""
    request = ScriptRequest(api=api, model="contradiction", messages=(), tools=(), turn=0)
    body = reply_body(request, ScriptReply(text="ok"), Usage(), "broken")
    if api == "openai":
        body["usage"].update(prompt_tokens=10, prompt_tokens_details={"cached_tokens": 25})
    else:
        body["usage"].update(input_tokens=-50, cache_read_input_tokens=10)
    return body
