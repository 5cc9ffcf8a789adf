"""The SDK clients' lean transport against a raw socket server that misbehaves on purpose."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx2
import pytest

from assay.providers import _transport
from assay.providers._transport import LeanTransport, lean_client

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


async def _post(client: httpx2.AsyncClient, url: str, timeout: float = 5.0) -> httpx2.Response:
    return await client.post(f"{url}/v1/x", content=b'{"a": 1}', timeout=timeout)


async def test_keep_alive_reuses_one_connection_and_sends_the_body(serve) -> None:  # type: ignore[no-untyped-def]
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_ok(b'{"ok": true}', b"x-request-id: r1"))
        await writer.drain()

    state, url = await serve(answer)
    async with httpx2.AsyncClient(transport=LeanTransport()) as client:
        for _ in range(3):
            got = await _post(client, url)
            assert got.status_code == 200 and got.json() == {"ok": True}
            assert got.headers["x-request-id"] == "r1"
    assert state.connections == 1
    assert all(r.endswith(b'{"a": 1}') for r in state.requests)


async def test_chunked_and_gzip_answers_are_decoded(serve) -> None:  # type: ignore[no-untyped-def]
    import gzip

    body = gzip.compress(b'{"long": "' + b"x" * 5000 + b'"}')

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n"
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:100], body[100:]))
        writer.write(head + chunks + b"0\r\n\r\n")
        await writer.drain()

    _, url = await serve(answer)
    async with httpx2.AsyncClient(transport=LeanTransport()) as client:
        got = await _post(client, url)
    assert got.json() == {"long": "x" * 5000}


async def test_a_server_that_closes_mid_answer_is_a_protocol_error(serve) -> None:  # type: ignore[no-untyped-def]
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"half')
        await writer.drain()
        writer.close()

    _, url = await serve(answer)
    async with httpx2.AsyncClient(transport=LeanTransport()) as client:
        with pytest.raises(httpx2.RemoteProtocolError):
            await _post(client, url)


async def test_a_server_that_closes_without_answering_is_a_protocol_error(serve) -> None:  # type: ignore[no-untyped-def]
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    _, url = await serve(answer)
    async with httpx2.AsyncClient(transport=LeanTransport()) as client:
        with pytest.raises(httpx2.RemoteProtocolError):
            await _post(client, url)


async def test_garbage_instead_of_http_is_a_protocol_error(serve) -> None:  # type: ignore[no-untyped-def]
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"\x00\xffnot http at all\r\n\r\n")
        await writer.drain()

    _, url = await serve(answer)
    async with httpx2.AsyncClient(transport=LeanTransport()) as client:
        with pytest.raises(httpx2.RemoteProtocolError):
            await _post(client, url)


async def test_an_oversized_answer_is_refused(serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_transport, "MAX_RESPONSE_BYTES", 1000)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_ok(b"x" * 5000))
        await writer.drain()

    _, url = await serve(answer)
    async with httpx2.AsyncClient(transport=LeanTransport()) as client:
        with pytest.raises(httpx2.RemoteProtocolError, match="over 1000 bytes"):
            await _post(client, url)


async def test_a_silent_server_times_out_and_its_connection_is_dropped(serve) -> None:  # type: ignore[no-untyped-def]
    calls = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(2)  # the client gave up meanwhile
        writer.write(_ok(b"{}"))
        await writer.drain()

    state, url = await serve(answer)
    async with httpx2.AsyncClient(transport=LeanTransport()) as client:
        with pytest.raises(httpx2.ReadTimeout):
            await _post(client, url, timeout=0.3)
        assert (await _post(client, url)).json() == {}
    assert state.connections == 2  # the timed-out connection was not reused


async def test_a_refused_connection_is_a_connect_error() -> None:
    async with httpx2.AsyncClient(transport=LeanTransport()) as client:
        with pytest.raises(httpx2.ConnectError):
            await _post(client, "http://127.0.0.1:9")


async def test_a_connection_the_server_closed_while_idle_is_not_reused(serve) -> None:  # type: ignore[no-untyped-def]
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_ok(b"{}"))
        await writer.drain()
        writer.close()  # keep-alive offered, then closed while idle

    state, url = await serve(answer)
    async with httpx2.AsyncClient(transport=LeanTransport()) as client:
        await _post(client, url)
        await asyncio.sleep(0.1)  # the EOF reaches the idle connection
        await _post(client, url)
    assert state.connections == 2


def test_a_proxy_in_the_environment_leaves_the_sdk_its_own_client(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert lean_client() is not None
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")  # nothing proxied: still lean
    assert lean_client() is not None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert lean_client() is None


async def test_a_server_that_never_reads_is_a_write_timeout() -> None:
    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(deaf, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx2.AsyncClient(transport=LeanTransport()) as client:
            with pytest.raises(httpx2.WriteTimeout):
                await client.post(
                    f"http://127.0.0.1:{port}/v1/x",
                    content=b"x" * (64 << 20),  # more than the socket buffers hold
                    timeout=httpx2.Timeout(5.0, write=0.3),
                )
    finally:
        server.close()
