"""A minimal HTTP/1.1 server on asyncio streams (keep-alive, Content-Length or chunked).

Just enough for the SDKs' httpx clients on loopback: no TLS, no pipelining, no upgrades.
Kept dependency-free so the scripted server adds no latency or packages of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from types import MappingProxyType
from typing import NamedTuple

__all__ = ["HttpRequest", "HttpResponse", "serve_connection"]


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

    def encode(self) -> bytes:
        """Status line, headers and body as bytes."""
        try:
            reason = HTTPStatus(self.status).phrase
        except ValueError:
            reason = "Unknown"
        lines = [
            f"HTTP/1.1 {self.status} {reason}",
            f"content-type: {self.content_type}",
            f"content-length: {len(self.body)}",
            "connection: keep-alive",
            *(f"{k}: {v}" for k, v in self.headers.items()),
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


Handler = Callable[[HttpRequest], Awaitable[HttpResponse | None]]
"""Answers a request; None means hang up without answering (a simulated dead upstream)."""


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks: list[bytes] = []
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(await reader.readexactly(size))
            await reader.readline()
    length = int(headers.get("content-length", "0") or 0)
    return await reader.readexactly(length) if length else b""


async def _read_request(reader: asyncio.StreamReader) -> HttpRequest | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await _read_body(reader, headers)
    return HttpRequest(method.upper(), target.split("?", 1)[0], headers, body)


async def serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: Handler
) -> None:
    """Serve requests on one connection until the client or the handler hangs up."""
    try:
        while True:
            request = await _read_request(reader)
            if request is None:
                break
            response = await handler(request)
            if response is None:
                break
            writer.write(response.encode())
            await writer.drain()
            if request.headers.get("connection", "").lower() == "close":
                break
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass  # the client went away or spoke gibberish: nothing left to answer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
