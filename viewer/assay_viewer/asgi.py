"""The viewer as one plain ASGI callable: a route table, safe headers, streamed events.

Any ASGI server runs it (`assay view` uses uvicorn); tests drive it through
`httpx.ASGITransport`. Routes answer GET and HEAD; a route may also take a POST of a small
url-encoded form (human review), its body bounded before it is read whole. Every response carries a strict Content-Security-Policy: scripts,
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


MAX_FORM_BYTES = 64 * 1024
"""A posted form larger than this is refused (413) before it is read whole."""
MAX_FORM_FIELDS = 200


class Request(NamedTuple):
    """What a page handler sees: the path's named parts, the query parameters, and (for a
    POST) the form's fields."""

    path: str
    match: dict[str, str]
    query: dict[str, str]
    method: str = "GET"
    form: dict[str, str] = {}  # noqa: RUF012  (a NamedTuple default, never mutated)
    params: tuple[tuple[str, str], ...] = ()
    """Every query parameter in order, repeats kept (`query` keeps a name's last value)."""


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
    """A path pattern (named groups) and its handler; `post`: it takes a posted form too."""

    pattern: re.Pattern[str]
    handler: Handler
    post: bool = False


async def _read_form(scope: Scope, receive: Receive) -> dict[str, str]:
    """The url-encoded form of a POST, read within `MAX_FORM_BYTES`."""
    headers = {bytes(k).lower(): bytes(v) for k, v in scope.get("headers", [])}
    kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    if kind != b"application/x-www-form-urlencoded":
        raise RequestRefused(415, "a form must be sent as application/x-www-form-urlencoded")
    declared = headers.get(b"content-length", b"0")
    if not declared.isdigit() or int(declared) > MAX_FORM_BYTES:
        raise RequestRefused(413, f"a form may hold at most {MAX_FORM_BYTES} bytes")
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise RequestRefused(400, "the client went away")
        body += message.get("body", b"")
        if len(body) > MAX_FORM_BYTES:
            raise RequestRefused(413, f"a form may hold at most {MAX_FORM_BYTES} bytes")
        if not message.get("more_body"):
            break
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    except (UnicodeDecodeError, ValueError) as e:
        raise RequestRefused(400, f"not a url-encoded form: {e}") from e
    return dict(pairs)


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
    """An ASGI callable serving `routes` (GET and HEAD; POST where a route takes a form)
    to its own address and `hosts` (further names it is served as)."""
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
        method = scope["method"]
        if method not in ("GET", "HEAD", "POST"):
            await _send_whole(send, Response(b"method not allowed\n", "text/plain", 405))
            return
        path: str = scope["path"]
        if not path.startswith("/"):  # absolute-form, its host checked above
            path = urlsplit(path).path or "/"
        params = tuple(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        query = dict(params)
        for route in routes:
            if m := route.pattern.fullmatch(path):
                form: dict[str, str] = {}
                if method == "POST":
                    if not route.post:
                        await _send_whole(
                            send, Response(b"method not allowed\n", "text/plain", 405)
                        )
                        return
                    try:
                        form = await _read_form(scope, receive)
                    except RequestRefused as e:
                        await _send_whole(send, Response(f"{e}\n".encode(), "text/plain", e.status))
                        return
                result = await route.handler(
                    Request(path, m.groupdict(), query, method, form, params)
                )
                if isinstance(result, Stream):
                    await _send_stream(send, receive, result)
                else:
                    await _send_whole(send, result)
                return
        await _send_whole(send, not_found(path))

    return app
