"""The gateway's side towards the provider: what reaches the program when the upstream
fails, hangs, closes its connections, answers garbage, speaks TLS or is behind a proxy;
each fault is recorded as the run's."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from assay.http11 import HttpRequest, HttpResponse, serve_connection
from assay_runner.gateway import _MAX_BODY, SOCKET_NAME, Gateway
from assay_schemas import AgentSpec
from tests.gateways import recording, serving
from tests.security.certs import make_pki

KEY_ENV = "ASSAY_TEST_UPSTREAM_KEY"
ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "up",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
Answer = Callable[[HttpRequest], HttpResponse]


@asynccontextmanager
async def _upstream(
    answer: Answer, tls: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[int, list[HttpRequest]]]:
    """A canned provider on loopback: its port and the requests it received."""
    received: list[HttpRequest] = []

    async def handle(request: HttpRequest) -> HttpResponse:
        received.append(request)
        return answer(request)

    server = await asyncio.start_server(
        lambda r, w: serve_connection(r, w, handle), "127.0.0.1", 0, ssl=tls
    )
    try:
        yield server.sockets[0].getsockname()[1], received
    finally:
        server.close()


@asynccontextmanager
async def _program(
    folder: Path, base_url: str, timeout_s: float = 30
) -> AsyncIterator[tuple[AsyncOpenAI, Gateway, list[dict[str, Any]]]]:
    """The program's SDK, talking to a gateway for base_url; and what the gateway logged."""
    os.environ[KEY_ENV] = "sk-upstream-test"
    logged, log = recording()
    agent = AgentSpec(
        agent_id="a", model="up", base_url=base_url, api_key_env=KEY_ENV, timeout_s=timeout_s
    )
    async with serving(folder, agent, log) as gateway:
        uds = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(folder / SOCKET_NAME)))
        # The installed SDK types its client against its own httpx alias; the object is the same.
        client = AsyncOpenAI(
            base_url="http://gateway/v1",
            api_key="x",
            http_client=uds,
            max_retries=0,  # type: ignore[arg-type]
        )
        try:
            yield client, gateway, logged
        finally:
            await uds.aclose()


async def _ask(client: AsyncOpenAI) -> Any:
    return await client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "hi"}]
    )


async def test_an_unreachable_upstream_is_a_fault_not_the_programs(tmp_path: Path) -> None:
    async with _program(tmp_path, "http://127.0.0.1:9/v1") as (client, gateway, logged):
        with pytest.raises(openai.APIStatusError) as refused:
            await _ask(client)
    assert refused.value.status_code == 502
    assert gateway.fault is not None and "Connect" in gateway.fault
    assert logged == []


async def test_a_busy_upstream_is_asked_again_and_its_answer_forwarded(tmp_path: Path) -> None:
    statuses = iter([503, 429, 200])

    def answer(request: HttpRequest) -> HttpResponse:
        status = next(statuses)
        return HttpResponse(status, json.dumps(ANSWER if status == 200 else {}).encode())

    async with (
        _upstream(answer) as (port, received),
        _program(tmp_path, f"http://127.0.0.1:{port}/v1") as (client, gateway, logged),
    ):
        reply = await _ask(client)
    assert reply.choices[0].message.content == "ok"
    assert len(received) == 3 and gateway.fault is None
    assert [f["usage"].input_tokens for f in logged] == [3]


async def test_an_upstream_refusal_reaches_the_program_as_it_was(tmp_path: Path) -> None:
    error = {"error": {"message": "context too long", "type": "invalid_request_error"}}

    def answer(request: HttpRequest) -> HttpResponse:
        return HttpResponse(400, json.dumps(error).encode())

    async with (
        _upstream(answer) as (port, received),
        _program(tmp_path, f"http://127.0.0.1:{port}/v1") as (client, gateway, logged),
    ):
        with pytest.raises(openai.BadRequestError, match="context too long"):
            await _ask(client)
    assert len(received) == 1  # a refusal is the program's to handle: not asked again
    assert gateway.fault is None and logged == []


async def test_an_unreadable_answer_is_a_fault_and_never_logged(tmp_path: Path) -> None:
    async with (
        _upstream(lambda request: HttpResponse(200, b"<html>oops</html>")) as (port, _),
        _program(tmp_path, f"http://127.0.0.1:{port}/v1") as (client, gateway, logged),
    ):
        with pytest.raises(openai.APIStatusError) as refused:
            await _ask(client)
    assert refused.value.status_code == 502
    assert gateway.fault is not None and "unreadable" in gateway.fault
    assert logged == []


async def test_the_environments_proxy_carries_the_upstream_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP(S)_PROXY and NO_PROXY are honoured as by any httpx client of the runner."""

    def answer(request: HttpRequest) -> HttpResponse:
        return HttpResponse(200, json.dumps(ANSWER).encode())

    async with _upstream(answer) as (port, received):
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        # The proxy is asked for the provider's address in absolute form; the name need
        # not resolve here, only at the proxy.
        async with _program(tmp_path, "http://provider.invalid/v1") as (client, _, logged):
            reply = await _ask(client)
    assert reply.choices[0].message.content == "ok"
    assert [r.path for r in received] == ["http://provider.invalid/v1/chat/completions"]
    assert received[0].headers["authorization"] == "Bearer sk-upstream-test"
    assert len(logged) == 1


def _ok(request: HttpRequest) -> HttpResponse:
    return HttpResponse(200, json.dumps(ANSWER).encode())


async def test_an_upstream_that_never_answers_times_out_as_a_fault(tmp_path: Path) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads the request, answers nothing, until the gateway hangs up

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with _program(tmp_path, f"http://127.0.0.1:{port}/v1", timeout_s=0.3) as (
            client,
            gateway,
            logged,
        ):
            with pytest.raises(openai.APIStatusError) as refused:
                await _ask(client)
    finally:
        server.close()
    assert refused.value.status_code == 502
    assert gateway.fault is not None and "TimeoutError" in gateway.fault
    assert logged == []


async def test_an_upstream_closing_each_connection_is_reconnected_each_call(
    tmp_path: Path,
) -> None:
    """`connection: close` on every answer, as some proxies and servers send."""

    def closing(request: HttpRequest) -> HttpResponse:
        return HttpResponse(200, json.dumps(ANSWER).encode(), {"connection": "close"})

    async with (
        _upstream(closing) as (port, received),
        _program(tmp_path, f"http://127.0.0.1:{port}/v1") as (client, gateway, logged),
    ):
        for _ in range(3):
            assert (await _ask(client)).choices[0].message.content == "ok"
    assert len(received) == 3 and gateway.fault is None
    assert len(logged) == 3


async def test_an_idle_connection_the_upstream_dropped_is_replaced(tmp_path: Path) -> None:
    """The upstream hangs up a kept-alive connection between two calls."""
    connections: list[asyncio.StreamWriter] = []

    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        body = json.dumps(ANSWER).encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
        writer.write(b"content-length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()  # no `connection: close` said: the client learns it from the socket

    server = await asyncio.start_server(once, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with _program(tmp_path, f"http://127.0.0.1:{port}/v1") as (client, gateway, _):
            await _ask(client)
            await asyncio.sleep(0.05)  # the hang-up reaches the gateway while it is idle
            assert (await _ask(client)).choices[0].message.content == "ok"
    finally:
        server.close()
    assert len(connections) == 2 and gateway.fault is None


async def test_a_tls_upstream_is_verified_against_the_trusted_cas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS upstreams are checked as by httpx: SSL_CERT_FILE (or certifi) names the CAs."""
    pki = make_pki(tmp_path / "pki")
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(pki.cert, pki.key)
    async with _upstream(_ok, served) as (port, received):
        async with _program(tmp_path / "untrusted", f"https://127.0.0.1:{port}/v1") as (
            client,
            gateway,
            _,
        ):
            with pytest.raises(openai.APIStatusError):
                await _ask(client)  # the test CA is not trusted yet
            assert gateway.fault is not None and "CERTIFICATE_VERIFY_FAILED" in gateway.fault
        monkeypatch.setenv("SSL_CERT_FILE", str(pki.ca))
        async with _program(tmp_path / "trusted", f"https://127.0.0.1:{port}/v1") as (
            client,
            gateway,
            logged,
        ):
            assert (await _ask(client)).choices[0].message.content == "ok"
    assert gateway.fault is None and len(logged) == 1
    assert received[-1].headers["authorization"] == "Bearer sk-upstream-test"


async def _raw_upstream(answer: bytes) -> asyncio.Server:
    """An upstream that reads one request head and writes `answer` as it is."""

    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    return await asyncio.start_server(reply, "127.0.0.1", 0)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        # A body past the gateway's cap, chunked so that no length warns of it.
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            + b"%x\r\n%s\r\n" % (_MAX_BODY + 1, b"x" * (_MAX_BODY + 1))
            + b"0\r\n\r\n",
            "over",
        ),
        # A head that never ends within h11's limit.
        (b"HTTP/1.1 200 OK\r\nx-pad: " + b"a" * (1024 * 1024) + b"\r\n\r\n", "RemoteProtocolError"),
    ],
    ids=["oversized-answer", "oversized-head"],
)
async def test_a_hostile_upstream_answer_is_a_fault_not_held_in_memory(
    tmp_path: Path, answer: bytes, why: str
) -> None:
    server = await _raw_upstream(answer)
    port = server.sockets[0].getsockname()[1]
    try:
        async with _program(tmp_path, f"http://127.0.0.1:{port}/v1") as (client, gateway, logged):
            with pytest.raises(openai.APIStatusError) as refused:
                await _ask(client)
    finally:
        server.close()
    assert refused.value.status_code == 502
    assert gateway.fault is not None and why in gateway.fault
    assert logged == []
