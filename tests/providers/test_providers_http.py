"""The providers' HTTP path (the SDKs' aiohttp client) against a raw socket server that
misbehaves on purpose: every misbehaviour is a transient provider error, never a hang or a
crash, and connections are kept alive and dropped when they must be."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from assay.providers import (
    GenerationParams,
    ProviderUnavailable,
    RetryPolicy,
    UserMessage,
)
from assay.providers._anthropic import AnthropicProvider
from assay.providers._openai import OpenAIProvider

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + await reader.readexactly(length)


def _ok(body: bytes, *extra: bytes) -> bytes:
    head = [b"HTTP/1.1 200 OK", b"content-type: application/json", *extra]
    head.append(b"content-length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body


class _Server:
    """A loopback server answering each request with `answer`; counts connections."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    self.requests.append(await _read_request(reader))
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                await self.answer(reader, writer)
                if writer.is_closing():
                    return
        finally:
            writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Answer], Awaitable[tuple[_Server, str]]]]:
    servers: list[asyncio.Server] = []

    async def start(answer: Answer) -> tuple[_Server, str]:
        state = _Server(answer)
        server = await asyncio.start_server(state._serve, "127.0.0.1", 0)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        return state, f"http://127.0.0.1:{port}"

    yield start
    for server in servers:
        server.close()


ONE_TRY = RetryPolicy(max_attempts=1)
CHAT = (
    b'{"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": '
    b'[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": '
    b'"hi"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}'
)


_MADE: list[OpenAIProvider | AnthropicProvider] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    """Each provider's aiohttp session is closed at the end of its test."""
    yield
    while _MADE:
        await _MADE.pop().aclose()


def _openai(url: str, timeout_s: float = 5.0) -> OpenAIProvider:
    provider = OpenAIProvider(
        model="m", api_key="k", base_url=f"{url}/v1", timeout_s=timeout_s, retry=ONE_TRY
    )
    _MADE.append(provider)
    return provider


async def _ask(provider: OpenAIProvider | AnthropicProvider) -> str:
    done = await provider.complete([UserMessage(content="hello")], (), GenerationParams())
    return done.text or ""


async def _fails(provider: OpenAIProvider | AnthropicProvider, kind: str) -> None:
    with pytest.raises(ProviderUnavailable) as caught:
        await _ask(provider)
    assert caught.value.last_error.kind == kind, caught.value


async def test_the_sdks_move_bytes_with_aiohttp() -> None:
    _MADE.append(AnthropicProvider(model="m", api_key="k"))
    for provider in (_openai("http://127.0.0.1:9"), _MADE[-1]):
        transport = provider._client._client._transport
        assert type(transport).__name__ == "AiohttpTransport"


async def test_keep_alive_reuses_one_connection_and_sends_the_body(serve) -> None:  # type: ignore[no-untyped-def]
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_ok(CHAT, b"x-request-id: r1"))
        await writer.drain()

    state, url = await serve(answer)
    provider = _openai(url)
    for _ in range(3):
        assert await _ask(provider) == "hi"
    assert state.connections == 1
    assert all(b'"content":"hello"' in r.replace(b" ", b"") for r in state.requests)


async def test_chunked_and_gzip_answers_are_decoded(serve) -> None:  # type: ignore[no-untyped-def]
    import gzip

    body = gzip.compress(CHAT)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
        head += b"transfer-encoding: chunked\r\n\r\n"
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:50], body[50:]))
        writer.write(head + chunks + b"0\r\n\r\n")
        await writer.drain()

    _, url = await serve(answer)
    assert await _ask(_openai(url)) == "hi"


async def test_a_server_that_closes_mid_answer_is_a_connection_failure(serve) -> None:  # type: ignore[no-untyped-def]
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"half')
        await writer.drain()
        writer.close()

    _, url = await serve(answer)
    await _fails(_openai(url), "connection")


async def test_a_server_that_closes_without_answering_is_a_connection_failure(serve) -> None:  # type: ignore[no-untyped-def]
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    _, url = await serve(answer)
    await _fails(_openai(url), "connection")


async def test_garbage_instead_of_http_is_a_connection_failure(serve) -> None:  # type: ignore[no-untyped-def]
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"\x00\xffnot http at all\r\n\r\n")
        await writer.drain()

    _, url = await serve(answer)
    await _fails(_openai(url), "connection")


async def test_a_silent_server_times_out_and_its_connection_is_dropped(serve) -> None:  # type: ignore[no-untyped-def]
    calls = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(2)  # the client gave up meanwhile
        writer.write(_ok(CHAT))
        await writer.drain()

    state, url = await serve(answer)
    await _fails(_openai(url, timeout_s=0.3), "timeout")
    assert await _ask(_openai(url)) == "hi"
    assert state.connections == 2  # the timed-out connection was not reused


async def test_a_refused_connection_is_a_connection_failure_that_says_so() -> None:
    """Issue #53 item 5: the SDKs word a refused port as "Request timed out." (OpenAI)
    or "Connection error." (Anthropic); the error names the refusal and the address."""
    anthropic = AnthropicProvider(
        model="m", api_key="k", base_url="http://127.0.0.1:9", retry=ONE_TRY
    )
    _MADE.append(anthropic)
    for provider in (_openai("http://127.0.0.1:9"), anthropic):
        with pytest.raises(ProviderUnavailable) as caught:
            await _ask(provider)
        assert caught.value.last_error.kind == "connection"
        assert "connection to 127.0.0.1:9 refused" in str(caught.value)
        assert "timed out" not in str(caught.value)


async def test_a_connection_the_server_closed_while_idle_is_not_reused(serve) -> None:  # type: ignore[no-untyped-def]
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_ok(CHAT))
        await writer.drain()
        writer.close()  # keep-alive offered, then closed while idle

    state, url = await serve(answer)
    provider = _openai(url)
    assert await _ask(provider) == "hi"
    await asyncio.sleep(0.1)  # the EOF reaches the idle connection
    assert await _ask(provider) == "hi"
    assert state.connections == 2
