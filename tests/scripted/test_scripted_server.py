"""The scripted server speaks both HTTP APIs well enough for the real SDKs, and injects faults."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from email.utils import parsedate_to_datetime
from typing import Any

import anthropic
import httpx
import openai
import pytest

from assay.providers import ToolResultMessage, Usage
from assay_testing.scripted import (
    Fault,
    ScriptedModelServer,
    ScriptedSequence,
    ScriptedToolCall,
    ScriptReply,
    ScriptRequest,
    echo,
)

TOOLS_OPENAI: list[Any] = [
    {"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}
]
TOOLS_ANTHROPIC: list[Any] = [{"name": "ls", "input_schema": {"type": "object"}}]


@pytest.fixture
async def http(server: ScriptedModelServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=5) as client:
        yield client


def _chat(model: str, text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def _message(model: str, text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


async def test_openai_sdk_parses_replies_strictly(server: ScriptedModelServer, model: str) -> None:
    server.add_script(
        model,
        ScriptedSequence([ScriptReply.call("ls", {"dir": "."}, text="listing"), "two files"]),
    )
    # Strict validation: the bodies satisfy the SDK's own response schema.
    client = openai.AsyncOpenAI(
        api_key="k",
        base_url=server.openai_base_url,
        max_retries=0,
        _strict_response_validation=True,
    )
    async with client:
        first = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "ls"}], tools=TOOLS_OPENAI
        )
        message = first.choices[0].message
        assert first.choices[0].finish_reason == "tool_calls"
        assert message.content == "listing"
        call = message.tool_calls[0] if message.tool_calls else None
        assert call is not None and call.type == "function"
        assert (call.function.name, json.loads(call.function.arguments)) == ("ls", {"dir": "."})
        assert first.usage is not None and first.usage.completion_tokens > 0

        second = await client.chat.completions.create(
            model=model,
            messages=[
                {"role": "user", "content": "ls"},
                message.model_dump(exclude_none=True),  # type: ignore[list-item]
                {"role": "tool", "tool_call_id": call.id, "content": "a b"},
            ],
        )
        assert second.choices[0].message.content == "two files"
        assert second.choices[0].finish_reason == "stop"


async def test_anthropic_sdk_parses_replies_strictly(
    server: ScriptedModelServer, model: str
) -> None:
    usage = Usage(input_tokens=50, output_tokens=5, cached_tokens=20)
    server.add_script(
        model,
        ScriptedSequence(
            [ScriptReply(text="listing", tool_calls=(ScriptedToolCall(name="ls"),), usage=usage)]
        ),
    )
    client = anthropic.AsyncAnthropic(
        api_key="k",
        base_url=server.base_url,
        max_retries=0,
        _strict_response_validation=True,
    )
    async with client:
        reply = await client.messages.create(
            model=model,
            max_tokens=64,
            messages=[{"role": "user", "content": "ls"}],
            tools=TOOLS_ANTHROPIC,
        )
    assert reply.stop_reason == "tool_use"
    assert [b.type for b in reply.content] == ["text", "tool_use"]
    tool_use = reply.content[1]
    assert tool_use.type == "tool_use" and tool_use.name == "ls" and tool_use.input == {}
    assert reply.usage.input_tokens == 30 and reply.usage.cache_read_input_tokens == 20


async def test_sequence_turns_follow_each_conversation(
    server: ScriptedModelServer, http: httpx.AsyncClient, model: str
) -> None:
    server.add_script(model, ScriptedSequence(["turn zero", "turn one"]))
    later = _chat(model)
    later["messages"] += [
        {"role": "assistant", "content": "earlier"},
        {"role": "user", "content": "again"},
    ]
    # Interleaved conversations: each gets the reply for its own turn.
    for body, expected in ((later, "turn one"), (_chat(model), "turn zero"), (later, "turn one")):
        r = await http.post("/v1/chat/completions", json=body)
        assert r.json()["choices"][0]["message"]["content"] == expected
    r = await http.post(
        "/v1/chat/completions",
        json={
            **later,
            "messages": [
                *later["messages"],
                {"role": "assistant", "content": "x"},
                {"role": "user", "content": "y"},
            ],
        },
    )
    assert r.status_code == 400 and "turn 2" in r.json()["error"]["message"]


async def test_faults_are_served_in_order_then_normal_replies(
    server: ScriptedModelServer, http: httpx.AsyncClient, model: str
) -> None:
    server.add_script(model, echo)
    server.inject(
        model,
        [Fault.rate_limit(retry_after=2), Fault.server_error(503), Fault.status_code(401)],
    )
    statuses = [
        (await http.post("/v1/messages", json=_message(model))).status_code for _ in range(4)
    ]
    assert statuses == [429, 503, 401, 200]
    assert [r.fault for r in server.requests(model)] == [
        "rate_limit",
        "server_error",
        "status",
        None,
    ]
    # Another model is untouched by this model's faults.
    server.add_script(f"{model}-other", echo)
    r = await http.post("/v1/messages", json=_message(f"{model}-other", "ping"))
    assert r.json()["content"] == [{"type": "text", "text": "ping"}]


async def test_error_bodies_and_retry_after_headers(
    server: ScriptedModelServer, http: httpx.AsyncClient, model: str
) -> None:
    server.inject(model, [Fault.rate_limit(retry_after=1.5), Fault.rate_limit(3, http_date=True)])
    r = await http.post("/v1/messages", json=_message(model))
    assert r.headers["retry-after"] == "1.5"
    assert r.json() == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "rate limit exceeded (injected)"},
    }
    r = await http.post("/v1/chat/completions", json=_chat(model))
    assert parsedate_to_datetime(r.headers["retry-after"]).tzinfo is not None
    assert r.json()["error"]["type"] == "rate_limit_exceeded"


async def test_malformed_bodies(
    server: ScriptedModelServer, http: httpx.AsyncClient, model: str
) -> None:
    server.add_script(model, echo)
    server.inject(model, [Fault.malformed("invalid_json"), Fault.malformed("missing_fields")])
    r = await http.post("/v1/chat/completions", json=_chat(model))
    assert r.status_code == 200
    with pytest.raises(ValueError):
        r.json()
    r = await http.post("/v1/chat/completions", json=_chat(model))
    assert r.status_code == 200 and "choices" not in r.json()


async def test_timeout_fault_holds_then_hangs_up(
    server: ScriptedModelServer, http: httpx.AsyncClient, model: str
) -> None:
    server.add_script(model, echo)
    server.inject(model, [Fault.timeout(hold_s=0.5)])
    with pytest.raises(httpx.ReadTimeout):
        await http.post("/v1/chat/completions", json=_chat(model), timeout=0.1)
    r = await http.post("/v1/chat/completions", json=_chat(model, "back"))
    assert r.json()["choices"][0]["message"]["content"] == "back"
    assert [rec.status for rec in server.requests(model)] == [None, 200]


async def test_dead_endpoint_until_healed(
    server: ScriptedModelServer, http: httpx.AsyncClient, model: str
) -> None:
    server.add_script(model, echo)
    server.fail_always(model)
    for _ in range(3):
        assert (await http.post("/v1/messages", json=_message(model))).status_code == 500
    server.heal(model)
    assert (await http.post("/v1/messages", json=_message(model))).status_code == 200


async def test_refusals_look_like_the_real_apis(
    server: ScriptedModelServer, http: httpx.AsyncClient, model: str
) -> None:
    r = await http.post("/v1/chat/completions", json=_chat(model))
    assert r.status_code == 404 and "not found" in r.json()["error"]["message"]
    r = await http.post("/v1/messages", json=_message(model))
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    assert (await http.post("/v1/nope", json={})).status_code == 404
    assert (await http.post("/v1/messages", content=b"not json")).status_code == 400

    def broken(request: ScriptRequest) -> ScriptReply:
        raise RuntimeError("oops")

    server.add_script(model, broken)
    r = await http.post("/v1/chat/completions", json=_chat(model))
    assert r.status_code == 400 and "RuntimeError: oops" in r.json()["error"]["message"]
    assert server.requests(model)[-1].error is not None


async def test_scripts_see_the_normalized_conversation_and_may_be_async(
    server: ScriptedModelServer, http: httpx.AsyncClient, model: str
) -> None:
    seen: list[ScriptRequest] = []

    async def script(request: ScriptRequest) -> ScriptReply:
        seen.append(request)
        await asyncio.sleep(0)
        return ScriptReply(text=f"{len(request.tool_results)} result(s)")

    server.add_script(model, script)
    body = {
        "model": model,
        "max_tokens": 10,
        "system": "be brief",
        "tools": TOOLS_ANTHROPIC,
        "messages": [
            {"role": "user", "content": "list"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "a b"},
                    {"type": "text", "text": "and?"},
                ],
            },
        ],
    }
    r = await http.post("/v1/messages", json=body)
    assert r.json()["content"][0]["text"] == "1 result(s)"
    request = seen[0]
    assert (request.api, request.turn, request.system, request.max_tokens) == (
        "anthropic",
        1,
        "be brief",
        10,
    )
    assert request.tool_results == (ToolResultMessage(call_id="t1", content="a b"),)
    assert request.last_user_text == "and?" and [t.name for t in request.tools] == ["ls"]


async def test_usage_is_estimated_deterministically_or_overridden(
    server: ScriptedModelServer, http: httpx.AsyncClient, model: str
) -> None:
    server.add_script(model, echo)
    first = (await http.post("/v1/chat/completions", json=_chat(model, "same"))).json()["usage"]
    again = (await http.post("/v1/chat/completions", json=_chat(model, "same"))).json()["usage"]
    assert first == again and first["prompt_tokens"] > 0 and first["completion_tokens"] > 0
    server.add_script(
        model, lambda r: ScriptReply(text="x", usage=Usage(input_tokens=7, output_tokens=3))
    )
    usage = (await http.post("/v1/chat/completions", json=_chat(model))).json()["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (7, 3, 10)


async def test_records_requests_and_chunked_bodies(
    server: ScriptedModelServer, http: httpx.AsyncClient, model: str
) -> None:
    server.add_script(model, echo)

    async def chunks() -> AsyncIterator[bytes]:
        raw = json.dumps(_chat(model, "chunked")).encode()
        yield raw[:10]
        yield raw[10:]

    r = await http.post("/v1/chat/completions", content=chunks(), headers={"x-trace": "t1"})
    assert r.json()["choices"][0]["message"]["content"] == "chunked"
    (record,) = server.requests(model, api="openai")
    assert record.headers["x-trace"] == "t1" and record.body == _chat(model, "chunked")
    assert server.requests(model, api="anthropic") == []


async def test_artificial_latency(
    server: ScriptedModelServer, http: httpx.AsyncClient, model: str
) -> None:
    server.add_script(model, echo)
    server.set_latency(model, 0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await http.post("/v1/chat/completions", json=_chat(model))
    assert loop.time() - started >= 0.05
    server.set_latency(model, None)


async def test_api_key_check_and_lifecycle() -> None:
    with ScriptedModelServer({"m": echo}, require_api_key="sk-right") as srv:
        port = srv.port
        async with httpx.AsyncClient(base_url=srv.base_url) as http:
            r = await http.post("/v1/messages", json=_message("m"), headers={"x-api-key": "sk-bad"})
            assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
            ok = await http.post(
                "/v1/chat/completions",
                json=_chat("m"),
                headers={"authorization": "Bearer sk-right"},
            )
            assert ok.status_code == 200
    srv.stop()  # idempotent
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.ConnectError):
            await http.post(f"http://127.0.0.1:{port}/v1/messages", json={})


async def test_a_server_told_not_to_record_serves_and_keeps_nothing(model: str) -> None:
    with ScriptedModelServer({model: ScriptedSequence(["one"])}, record=False) as quiet:
        async with httpx.AsyncClient(base_url=quiet.base_url, timeout=5) as client:
            reply = await client.post("/v1/chat/completions", json=_chat(model))
            missing = await client.post("/v1/nowhere", json=_chat(model))
        assert reply.json()["choices"][0]["message"]["content"] == "one"
        assert missing.status_code == 404
        assert quiet.requests() == []
