"""Network stand-ins for web tool tests: a small HTTP server on loopback, in its own thread.

Each route answers with a status, headers and a body; a body may be a callable that
streams chunks with pauses (a never-ending or slow-drip body). `searxng_results` shapes a
SearXNG JSON answer. Requests are recorded (path and headers) to check what was sent.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from assay_runner.web import NetPolicy

Body = bytes | Callable[[], AsyncIterator[bytes]]

STAND_IN = "127.0.0.2"
"""The loopback address the stand-ins listen on: a test address the web tool may reach."""
STAND_IN_POLICY = NetPolicy(test_addresses=frozenset({STAND_IN}))
"""The web tool's network policy that lets it reach the stand-ins."""


@dataclass
class Route:
    """One answer of the stand-in."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "text/html"})
    body: Body = b""


@dataclass
class Seen:
    """One request the stand-in received."""

    path: str
    headers: dict[str, str]


class WebStandIn:
    """An HTTP/1.1 server on 127.0.0.1 (or ::1) answering routes by path (query included,
    else path alone); a route may be set or replaced while it runs."""

    def __init__(
        self,
        routes: dict[str, Route] | None = None,
        host: str = "127.0.0.1",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.routes = dict(routes or {})
        self.host = host
        self.tls = tls
        self.seen: list[Seen] = []
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.port = 0

    def __enter__(self) -> Self:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        fut.result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop answering (connections refused from now on)."""
        if self._server is None:
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._server = None

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()

    @property
    def base(self) -> str:
        """The stand-in's URL prefix."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            headers = dict(
                (k.strip().lower(), v.strip())
                for k, _, v in (line.partition(":") for line in lines[1:] if line)
            )
            self.seen.append(Seen(path, headers))
            route = self.routes.get(path) or self.routes.get(path.split("?")[0])
            if route is None:
                route = Route(404, {"Content-Type": "text/plain"}, b"not found")
            out = [f"HTTP/1.1 {route.status} X"]
            out += [f"{k}: {v}" for k, v in route.headers.items()]
            if isinstance(route.body, bytes):
                out.append(f"Content-Length: {len(route.body)}")
                writer.write(("\r\n".join(out) + "\r\nConnection: close\r\n\r\n").encode())
                writer.write(route.body)
                await writer.drain()
            else:
                writer.write(("\r\n".join(out) + "\r\nConnection: close\r\n\r\n").encode())
                async for chunk in route.body():
                    writer.write(chunk)
                    await writer.drain()
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


def html_page(title: str, body: str) -> Route:
    """An HTML page route."""
    page = f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>{body}</article></body></html>"
    return Route(200, {"Content-Type": "text/html; charset=utf-8"}, page.encode())


def searxng_results(*hits: tuple[str, str, str]) -> Route:
    """A SearXNG JSON answer with (title, url, snippet) hits."""
    results: list[dict[str, Any]] = [{"title": t, "url": u, "content": c} for t, u, c in hits]
    return Route(
        200, {"Content-Type": "application/json"}, json.dumps({"results": results}).encode()
    )


def self_signed(tmp: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate for `name`, and a client context trusting only it."""
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            f"/CN={name}",
            "-addext",
            f"subjectAltName=DNS:{name}",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=str(cert))
    return server, client
