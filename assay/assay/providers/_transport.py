"""The SDK clients' HTTP transport: h11 over asyncio streams, a few idle connections kept.

The SDKs talk through an `httpx2.AsyncClient`; its default transport (httpcore's pool:
anyio streams and cancel scopes, a socket-readable check and a pool walk per request)
was about a third of the runner's CPU per agent step at hundreds of runs in flight. The
SDKs accept any client (`http_client=`), so they keep doing everything they do (auth,
headers, timeouts, error mapping, parsing); only the moving of bytes is ours. Where the
environment names a proxy, the SDK's own client is used instead (see `lean_client`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable
from typing import Any

import h11
import httpx2
from httpx2._utils import get_environment_proxies

__all__ = ["MAX_RESPONSE_BYTES", "LeanTransport", "lean_client"]

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""A model's answer larger than this is refused (a broken or hostile endpoint)."""
MAX_IDLE = 100
"""Idle keep-alive connections kept per origin (the SDKs' own pool keeps 100)."""
_READ = 65536

_Origin = tuple[str, str, int]


class _Conn:
    """One keep-alive connection and its protocol state."""

    __slots__ = ("h11", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=256 * 1024)

    def close(self) -> None:
        self.writer.close()


def _timeouts(request: httpx2.Request) -> tuple[float | None, float | None, float | None]:
    """(connect, write, read) seconds from the request's httpx timeout extension."""
    t: dict[str, float | None] = request.extensions.get("timeout") or {}
    return t.get("connect"), t.get("write"), t.get("read")


class LeanTransport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 requests on keep-alive connections; errors raised as httpx's own types, so
    the SDKs map them as they map httpcore's (timeouts, connection failures)."""

    def __init__(self, ssl_context: Callable[[], ssl.SSLContext] = httpx2.create_ssl_context):
        self._make_ssl = ssl_context
        self._ssl: ssl.SSLContext | None = None
        self._idle: dict[_Origin, list[_Conn]] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send one request and read its whole answer."""
        url = request.url
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        connect_s, write_s, read_s = _timeouts(request)
        body = request.content if isinstance(request.stream, httpx2.ByteStream) else None
        if body is None:
            body = await request.aread()
        conn = self._take(origin) or await self._open(origin, connect_s, request)
        try:
            response = await self._exchange(conn, request, body, (write_s, read_s))
        except BaseException:
            conn.close()  # cancelled or broken mid-exchange: its state is unknown
            raise
        self._give_back(origin, conn)
        return response

    def _take(self, origin: _Origin) -> _Conn | None:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            # The event loop reads a closed connection's EOF as it arrives: no syscall here.
            if not conn.reader.at_eof() and not conn.writer.is_closing():
                return conn
            conn.close()
        return None

    def _give_back(self, origin: _Origin, conn: _Conn) -> None:
        state = conn.h11
        if state.our_state is h11.DONE and state.their_state is h11.DONE and not self._closed:
            state.start_next_cycle()
            idle = self._idle.setdefault(origin, [])
            if len(idle) < MAX_IDLE:
                idle.append(conn)
                return
        conn.close()  # the server asked to close, or enough are idle

    async def _open(self, origin: _Origin, timeout: float | None, request: httpx2.Request) -> _Conn:
        scheme, host, port = origin
        tls = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = self._make_ssl()
            tls = self._ssl
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=tls, server_hostname=host if tls else None, limit=_READ
                )
        except TimeoutError as e:
            raise httpx2.ConnectTimeout(
                f"connecting to {host}:{port} timed out", request=request
            ) from e
        except (OSError, ssl.SSLError) as e:
            raise httpx2.ConnectError(f"{type(e).__name__}: {e}", request=request) from e
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Conn(reader, writer)

    async def _exchange(
        self,
        conn: _Conn,
        request: httpx2.Request,
        body: bytes,
        timeouts: tuple[float | None, float | None],
    ) -> httpx2.Response:
        state, (write_s, read_s) = conn.h11, timeouts
        try:
            head = h11.Request(
                method=request.method, target=request.url.raw_path, headers=request.headers.raw
            )
            out = state.send(head) or b""
            if body:
                out += state.send(h11.Data(data=body)) or b""
            out += state.send(h11.EndOfMessage()) or b""
            conn.writer.write(out)
            async with asyncio.timeout(write_s):
                await conn.writer.drain()
        except h11.LocalProtocolError as e:
            raise httpx2.LocalProtocolError(str(e), request=request) from e
        except TimeoutError as e:
            raise httpx2.WriteTimeout(
                "the request could not be sent in time", request=request
            ) from e
        except OSError as e:
            raise httpx2.WriteError(f"{type(e).__name__}: {e}", request=request) from e
        answer: h11.Response | None = None
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await self._next_event(conn, request, read_s)
            if isinstance(event, h11.Response):
                answer = event
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size > MAX_RESPONSE_BYTES:
                    raise httpx2.RemoteProtocolError(
                        f"answer over {MAX_RESPONSE_BYTES} bytes", request=request
                    )
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
        assert answer is not None  # h11 sends a Response before any Data or EndOfMessage
        return httpx2.Response(
            status_code=answer.status_code,
            headers=answer.headers.raw_items(),
            stream=httpx2.ByteStream(b"".join(chunks)),
            request=request,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": answer.reason},
        )

    async def _next_event(self, conn: _Conn, request: httpx2.Request, read_s: float | None) -> Any:
        state = conn.h11
        while True:
            try:
                event = state.next_event()
            except h11.RemoteProtocolError as e:
                raise httpx2.RemoteProtocolError(str(e), request=request) from e
            if event is h11.NEED_DATA:
                try:
                    async with asyncio.timeout(read_s):
                        data = await conn.reader.read(_READ)
                except TimeoutError as e:
                    raise httpx2.ReadTimeout(
                        "the answer did not come in time", request=request
                    ) from e
                except OSError as e:
                    raise httpx2.ReadError(f"{type(e).__name__}: {e}", request=request) from e
                state.receive_data(data)  # b"": the server closed; h11 tells what that means
                continue
            if isinstance(event, h11.InformationalResponse):
                continue  # 100 Continue and the like: the answer follows
            if isinstance(event, h11.ConnectionClosed):
                raise httpx2.RemoteProtocolError(
                    "the server closed the connection mid-answer", request=request
                )
            return event

    async def aclose(self) -> None:
        """Close every idle connection; connections in use close when their request ends."""
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()


def lean_client(**defaults: Any) -> httpx2.AsyncClient | None:
    """An httpx client on `LeanTransport` with the SDK's `defaults` (timeout, limits,
    redirects), or None where the environment names an HTTP proxy: then the SDK's own
    client (which honours proxies as httpx does) is the one to use."""
    with contextlib.suppress(Exception):  # an unreadable proxy setting: the SDK's client
        if not any(get_environment_proxies().values()):  # NO_PROXY alone routes nothing
            return httpx2.AsyncClient(transport=LeanTransport(), **defaults)
    return None
