"""HTTP/1.1 serving for Assay's own endpoints (the scripted model server, a run's model
gateway): h11 speaks the protocol, asyncio streams move the bytes.

h11 (the protocol library under httpx and uvicorn) does the framing: keep-alive,
Content-Length or chunked bodies, header size limits, and refusing malformed requests.
This module only moves bytes between it and a socket, caps the body, answers what h11
refuses, and hands each request to a handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import NamedTuple

import h11

__all__ = ["MAX_HEAD", "HttpRequest", "HttpResponse", "serve_connection"]

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


class _Refused(Exception):
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
