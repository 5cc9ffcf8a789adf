"""HTTP/1.1 for Assay's own endpoints (the scripted model server, a run's model gateway)
and for the gateway's one upstream: h11 speaks the protocol, asyncio streams move the bytes.

h11 (the protocol library under httpx, httpcore and uvicorn) does the framing: keep-alive,
Content-Length or chunked bodies, header size limits, and refusing malformed messages.
This module only moves bytes between it and a socket, caps bodies, answers what h11
refuses, and hands each request to a handler (serving) or returns each answer (Upstream).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple
from urllib.parse import urlsplit

import h11

from assay_schemas import AssayError, InvalidInput

__all__ = [
    "MAX_HEAD",
    "HttpRequest",
    "HttpResponse",
    "Upstream",
    "UpstreamError",
    "serve_connection",
]

_READ_SIZE = 64 * 1024
MAX_HEAD = 64 * 1024
"""Request line and headers together; more is refused (431)."""


class HttpRequest(NamedTuple):
    """One parsed request."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: bytes


class HttpResponse(NamedTuple):
    """One response to send."""

    status: int
    body: bytes
    headers: Mapping[str, str] = MappingProxyType({})
    content_type: str = "application/json"

    def events(self) -> tuple[h11.Response, h11.Data, h11.EndOfMessage]:
        """The response as h11 events: head, body, end."""
        headers = [
            ("content-type", self.content_type),
            ("content-length", str(len(self.body))),
            *self.headers.items(),
        ]
        return (
            h11.Response(status_code=self.status, headers=headers),
            h11.Data(data=self.body),
            h11.EndOfMessage(),
        )


Handler = Callable[[HttpRequest], Awaitable[HttpResponse | None]]
"""Answers a request; None means hang up without answering (a simulated dead upstream)."""


class _Refused(InvalidInput):
    """A request this server will not read: answered with `status`, then the connection ends."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    def response(self) -> HttpResponse:
        # Both SDK error shapes (OpenAI's and Anthropic's) read error.message from this.
        error = {"type": "error", "error": {"type": "invalid_request", "message": str(self)}}
        return HttpResponse(self.status, json.dumps(error).encode(), {"connection": "close"})


async def _next_event(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Event | None:
    """The next protocol event, reading as needed; None when the peer is gone."""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(_READ_SIZE))
            continue
        if event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
            return None
        assert not isinstance(event, type)  # the other sentinels are handled above
        return event


async def _read_request(
    conn: h11.Connection, reader: asyncio.StreamReader, max_body: int
) -> HttpRequest | None:
    head = await _next_event(conn, reader)
    if not isinstance(head, h11.Request):
        return None
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in head.headers}
    # h11 has checked that a Content-Length is a number; refuse before reading the body.
    if int(headers.get("content-length", "0")) > max_body:
        raise _Refused(413, f"request body over {max_body} bytes")
    body = bytearray()
    while isinstance(event := await _next_event(conn, reader), h11.Data):
        body += event.data
        if len(body) > max_body:  # a chunked body declares no length
            raise _Refused(413, f"request body over {max_body} bytes")
    if not isinstance(event, h11.EndOfMessage):
        return None
    path = head.target.decode("latin-1").split("?", 1)[0]
    return HttpRequest(head.method.decode("ascii").upper(), path, headers, bytes(body))


def _send(conn: h11.Connection, writer: asyncio.StreamWriter, response: HttpResponse) -> None:
    writer.write(b"".join(conn.send(event) or b"" for event in response.events()))


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    handler: Handler,
    *,
    max_body: int = 64 * 1024 * 1024,
) -> None:
    """Serve requests on one connection until the client or the handler hangs up.

    A malformed request is answered 400, a body over `max_body` 413 and a head over
    MAX_HEAD 431, each before the handler sees it; the connection then ends.
    """
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        # One write per reply already; no Nagle wait for an ACK the client delays.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    try:
        while (request := await _read_request(conn, reader, max_body)) is not None:
            response = await handler(request)
            if response is None:
                break
            _send(conn, writer, response)
            await writer.drain()
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                break  # either side asked to close (`connection: close`)
            conn.start_next_cycle()
    except (_Refused, h11.RemoteProtocolError) as e:
        refused = e if isinstance(e, _Refused) else _Refused(e.error_status_hint, str(e))
        with contextlib.suppress(h11.LocalProtocolError, ConnectionError):
            _send(conn, writer, refused.response())
            await writer.drain()
    except (ConnectionError, h11.ProtocolError):
        pass  # the client went away mid-reply: nothing left to answer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


class UpstreamError(AssayError):
    """The upstream could not be reached or broke the exchange; the connection is dropped."""


class Upstream:
    """One keep-alive connection to one origin, for a caller that sends one request at a
    time (a run's gateway to its provider).

    The gateway's hop is the overhead every model call of a program pays, and httpcore's
    general machinery (a pool, anyio cancel scopes, a write per h11 event) cost about
    0.85 ms a call more than h11 over one asyncio stream in paired bench runs. Proxies are not handled here:
    the gateway sends a proxied upstream through httpcore.
    """

    def __init__(self, origin: str, *, ssl_context: ssl.SSLContext | None, max_body: int) -> None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {origin!r}")
        https = parts.scheme == "https"
        self._tls = (ssl_context or ssl.create_default_context()) if https else None
        self._host = parts.hostname
        self._port = parts.port or (443 if https else 80)
        self._authority = parts.netloc.rsplit("@", 1)[-1]
        self._max_body = max_body
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._conn = h11.Connection(h11.CLIENT)

    async def post(
        self, url: str, headers: Sequence[tuple[str, str]], body: bytes, *, timeout: float
    ) -> tuple[int, bytes]:
        """POST `body` to `url` (on this origin): the answer's status and body.

        Raises UpstreamError when the upstream cannot be reached, breaks the exchange or
        does not answer within `timeout` seconds; the connection is then dropped.
        """
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        try:
            async with asyncio.timeout(timeout):
                return await self._exchange(target, headers, body)
        except (OSError, EOFError, TimeoutError, h11.ProtocolError) as e:
            self._drop()
            raise UpstreamError(f"{type(e).__name__}: {e}".rstrip(": ")) from e
        except BaseException:
            self._drop()  # cancelled mid-exchange: the connection's state is unknown
            raise

    async def aclose(self) -> None:
        """Close the connection (a later post opens a new one)."""
        writer = self._drop()
        if writer is not None:
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    def _drop(self) -> asyncio.StreamWriter | None:
        streams, self._streams = self._streams, None
        self._conn = h11.Connection(h11.CLIENT)
        if streams is None:
            return None
        streams[1].close()
        return streams[1]

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._streams is not None and not self._streams[0].at_eof():
            return self._streams
        self._drop()  # closed by the upstream while idle: open a new one
        reader, writer = await asyncio.open_connection(self._host, self._port, ssl=self._tls)
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._streams = reader, writer
        return reader, writer

    async def _exchange(
        self, target: str, headers: Sequence[tuple[str, str]], body: bytes
    ) -> tuple[int, bytes]:
        reader, writer = await self._open()
        conn = self._conn
        head = [("host", self._authority), ("content-length", str(len(body))), *headers]
        events = (h11.Request(method="POST", target=target, headers=head), h11.Data(data=body))
        writer.write(b"".join(conn.send(e) or b"" for e in (*events, h11.EndOfMessage())))
        await writer.drain()
        status, answer = 0, bytearray()
        while not isinstance(event := await _next_event(conn, reader), h11.EndOfMessage):
            if event is None:
                raise EOFError("the upstream closed the connection mid-answer")
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                answer += event.data
                if len(answer) > self._max_body:
                    raise EOFError(f"the upstream's answer is over {self._max_body} bytes")
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        else:
            self._drop()  # the upstream asked to close (`connection: close`)
        return status, bytes(answer)
