"""Streamed model calls through a run's gateway: the real SDKs read a stream, the run's
log holds one step with the whole answer (the SDKs speak to the gateway's socket from the
host here, as a program's would through the sandbox's loopback forwarder)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from assay.store import LocalBlobStore
from assay_runner.gateway import SOCKET_NAME
from assay_schemas import AgentSpec
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply
from tests.gateways import recording, serving

KEY_ENV = "ASSAY_TEST_STREAM_KEY"
REPLIES = [
    ScriptReply.call("bash", {"command": "ls"}, text="Looking first."),
    ScriptReply(text="The answer is 42."),
]


@pytest.fixture
def server() -> Any:
    os.environ[KEY_ENV] = "sk-stream-test"
    with ScriptedModelServer({"up": ScriptedSequence(REPLIES)}) as s:
        yield s


@pytest.fixture
async def logged(tmp_path: Path, server: ScriptedModelServer, request: Any) -> AsyncIterator[Any]:
    provider = request.param
    base = server.openai_base_url if provider == "openai" else server.base_url
    fields, log = recording()
    agent = AgentSpec(
        agent_id="a", provider=provider, model="up", base_url=base, api_key_env=KEY_ENV
    )
    async with serving(tmp_path, agent, log) as gateway:
        # Each SDK is typed against (and the Anthropic one checks for) its own httpx.
        http = httpx if provider == "openai" else httpx2
        uds = http.AsyncClient(transport=http.AsyncHTTPTransport(uds=str(tmp_path / SOCKET_NAME)))
        try:
            yield uds, fields, LocalBlobStore(tmp_path / "blobs"), gateway
        finally:
            await uds.aclose()


@pytest.mark.parametrize("logged", ["openai"], indirect=True)
async def test_openai_stream_is_served_and_logged_as_one_step(logged: Any) -> None:
    uds, fields, store, gateway = logged
    client = AsyncOpenAI(base_url="http://gateway/v1", api_key="x", http_client=uds)  # type: ignore[arg-type]
    messages: Any = [{"role": "user", "content": "what is it?"}]
    streamed = []
    for _ in range(2):
        stream = await client.chat.completions.create(
            model="whatever",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
        text, calls, usage, finish = "", {}, None, None
        async for chunk in stream:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
                for call in choice.delta.tool_calls or []:
                    assert call.function is not None
                    calls.setdefault(call.index, [call.id, call.function.name, ""])
                    calls[call.index][2] += call.function.arguments or ""
        streamed.append((text, calls, usage, finish))
        messages.append({"role": "assistant", "content": text})
        messages.append({"role": "user", "content": "go on"})
    await gateway.close()  # the last step is logged by then
    for turn, ((text, calls, usage, finish), step) in enumerate(zip(streamed, fields, strict=True)):
        assert text == step["model_output"]
        assert [(c[1], c[2]) for c in calls.values()] == [
            (c.name, c.arguments) for c in step["tool_calls"]
        ]
        assert usage is not None and usage.prompt_tokens == step["usage"].input_tokens > 0
        assert finish == ("tool_calls" if turn == 0 else "stop")
    assert [f["model_output"] for f in fields] == ["Looking first.", "The answer is 42."]
    # The log keeps the whole answer, and what went upstream was one plain call.
    answer = json.loads(store.get_bytes(fields[0]["response_sha256"]))
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"
    sent = json.loads(store.get_bytes(fields[0]["request_sha256"]))
    assert "stream" not in sent and sent["model"] == "up"


@pytest.mark.parametrize("logged", ["anthropic"], indirect=True)
async def test_anthropic_stream_is_served_and_logged_as_one_step(logged: Any) -> None:
    uds, fields, _, gateway = logged
    client = AsyncAnthropic(base_url="http://gateway", api_key="x", http_client=uds)
    async with client.messages.stream(
        model="whatever", max_tokens=100, messages=[{"role": "user", "content": "what is it?"}]
    ) as stream:
        message = await stream.get_final_message()
    await gateway.close()
    [step] = fields
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[0].text == step["model_output"] == "Looking first."  # type: ignore[union-attr]
    assert message.content[1].input == {"command": "ls"}  # type: ignore[union-attr]
    assert message.stop_reason == "tool_use"
    assert message.usage.output_tokens == step["usage"].output_tokens > 0
