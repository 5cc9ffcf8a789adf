"""OpenAI's Responses API through a run's gateway (the SDKs of several agent frameworks
default to it), plain and streamed, against a canned upstream that speaks it."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI

from assay.http11 import HttpRequest, HttpResponse, serve_connection
from assay_runner.gateway import SOCKET_NAME
from assay_schemas import AgentSpec
from tests.gateways import recording, serving

KEY_ENV = "ASSAY_TEST_RESPONSES_KEY"
USAGE = {
    "input_tokens": 12,
    "output_tokens": 5,
    "total_tokens": 17,
    "input_tokens_details": {"cached_tokens": 2},
    "output_tokens_details": {"reasoning_tokens": 0},
}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "read_file",
    "arguments": '{"path": "od.csv"}',
    "status": "completed",
}
MESSAGE = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "A peaks at 0.9", "annotations": []}],
}


def _response(n: int, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": "up",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": USAGE,
    }


@pytest.fixture
async def gateway_of(tmp_path: Path) -> AsyncIterator[tuple[Any, list[Any], list[Any]]]:
    os.environ[KEY_ENV] = "sk-responses-test"
    received: list[HttpRequest] = []
    answers = iter([_response(1, [CALL]), _response(2, [MESSAGE])] * 2)

    async def upstream(request: HttpRequest) -> HttpResponse:
        received.append(request)
        return HttpResponse(200, json.dumps(next(answers)).encode())

    server = await asyncio.start_server(
        lambda r, w: serve_connection(r, w, upstream), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    logged, log = recording()
    agent = AgentSpec(
        agent_id="a", model="up", base_url=f"http://127.0.0.1:{port}/v1", api_key_env=KEY_ENV
    )
    async with serving(tmp_path, agent, log):
        uds = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(tmp_path / SOCKET_NAME)))
        client = AsyncOpenAI(base_url="http://gateway/v1", api_key="x", http_client=uds)  # type: ignore[arg-type]
        try:
            yield client, logged, received
        finally:
            await uds.aclose()
        server.close()


def _check_log(logged: list[dict[str, Any]], received: list[HttpRequest]) -> None:
    assert [[c.name for c in f["tool_calls"]] for f in logged] == [["read_file"], []]
    assert [f["model_output"] for f in logged] == ["", "A peaks at 0.9"]
    assert logged[0]["usage"].input_tokens == 12 and logged[0]["usage"].cached_tokens == 2
    assert [r.path for r in received] == ["/v1/responses"] * 2
    assert all(r.headers["authorization"] == "Bearer sk-responses-test" for r in received)
    assert all("stream" not in json.loads(r.body) for r in received)


async def test_responses_are_forwarded_and_logged(gateway_of: Any) -> None:
    client, logged, received = gateway_of
    first = await client.responses.create(model="any", input="Which strain peaks?")
    assert first.output[0].type == "function_call"
    second = await client.responses.create(
        model="any",
        input=[{"type": "function_call_output", "call_id": "call_1", "output": "A,0.9"}],
    )
    assert second.output_text == "A peaks at 0.9"
    await client.responses.create(model="any", input="settle")  # waits for the last log
    _check_log(logged[:2], received[:2])


async def test_streamed_responses_are_replayed_and_logged_once(gateway_of: Any) -> None:
    client, logged, received = gateway_of
    finals = []
    deltas = []
    for text in ("Which strain peaks?", "go on"):
        async with client.responses.stream(model="any", input=text) as stream:
            async for event in stream:
                if event.type in (
                    "response.output_text.delta",
                    "response.function_call_arguments.delta",
                ):
                    deltas.append(event.delta)
            finals.append(await stream.get_final_response())
    assert finals[0].output[0].type == "function_call"
    assert finals[0].output[0].arguments == '{"path": "od.csv"}'  # type: ignore[union-attr]
    assert finals[1].output_text == "A peaks at 0.9"
    assert deltas == ['{"path": "od.csv"}', "A peaks at 0.9"]
    await client.responses.create(model="any", input="settle")  # waits for the log
    _check_log(logged[:2], received[:2])
