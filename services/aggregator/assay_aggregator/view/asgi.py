"""The viewer as one plain ASGI callable: a route table, safe headers, streamed events.

Any ASGI server runs it (`assay view` uses uvicorn); tests drive it through
`httpx.ASGITransport`. Every response carries a strict Content-Security-Policy: scripts,
styles and images come from the viewer itself, nothing inline, nothing framed. A request
for another host or from another origin is refused first (`hosts`: DNS rebinding).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, urlsplit

from .hosts import RequestRefused, check_request

__all__ = ["CSP", "Request", "Response", "Route", "Stream", "asgi_app"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_SAFE_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Request(NamedTuple):
    """What a page handler sees: the path's named parts and the query parameters."""

    path: str
    match: dict[str, str]
    query: dict[str, str]


class Response(NamedTuple):
    """A whole response body."""

    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()


class Stream(NamedTuple):
    """A response sent as it is produced (server-sent events)."""

    chunks: AsyncIterator[bytes]
    content_type: str = "text/event-stream; charset=utf-8"


Handler = Callable[[Request], Awaitable[Response | Stream]]


class Route(NamedTuple):
    """A GET path pattern (named groups) and its handler."""

    pattern: re.Pattern[str]
    handler: Handler


def _head(status: int, content_type: str, extra: tuple[tuple[str, str], ...] = ()) -> Message:
    own = [(k.encode(), v.encode()) for k, v in extra]
    names = {k for k, _ in own}  # a response's own header replaces the default
    headers = [(b"content-type", content_type.encode())]
    headers += [h for h in _SAFE_HEADERS if h[0] not in names] + own
    return {"type": "http.response.start", "status": status, "headers": headers}


async def _send_whole(send: Send, response: Response) -> None:
    await send(_head(response.status, response.content_type, response.headers))
    await send({"type": "http.response.body", "body": response.body})


async def _send_stream(send: Send, receive: Receive, stream: Stream) -> None:
    """Stream until the producer ends or the client goes away (then the producer is closed)."""
    await send(_head(200, stream.content_type))
    gone = asyncio.ensure_future(_disconnected(receive))
    try:
        while True:
            chunk = asyncio.ensure_future(anext(stream.chunks))
            done, _ = await asyncio.wait({chunk, gone}, return_when=asyncio.FIRST_COMPLETED)
            if gone in done:
                chunk.cancel()
                await asyncio.gather(chunk, return_exceptions=True)
                return
            try:
                body = chunk.result()
            except StopAsyncIteration:
                break
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        gone.cancel()
        aclose = getattr(stream.chunks, "aclose", None)
        if aclose is not None:
            await aclose()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def asgi_app(
    routes: list[Route], not_found: Callable[[str], Response], hosts: Iterable[str] = ()
) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """An ASGI callable serving `routes` (GET and HEAD only) to its own address and
    `hosts` (further names it is served as)."""
    names = tuple(hosts)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        try:
            check_request(dict(scope), names)
        except RequestRefused as e:
            await _send_whole(send, Response(f"{e}\n".encode(), "text/plain", e.status))
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _send_whole(send, Response(b"method not allowed\n", "text/plain", 405))
            return
        path: str = scope["path"]
        if not path.startswith("/"):  # absolute-form, its host checked above
            path = urlsplit(path).path or "/"
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        for route in routes:
            if m := route.pattern.fullmatch(path):
                result = await route.handler(Request(path, m.groupdict(), query))
                if isinstance(result, Stream):
                    await _send_stream(send, receive, result)
                else:
                    await _send_whole(send, result)
                return
        await _send_whole(send, not_found(path))

    return app
