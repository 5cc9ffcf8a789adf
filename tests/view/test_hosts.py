"""DNS rebinding: the viewer answers only to the address it serves.

A web page at evil.example can point its own name at 127.0.0.1 and then read the viewer
as same-origin; the browser then sends `Host: evil.example`. So every request's Host (or
an absolute-form target's authority) must name a loopback address or `localhost` (or a
name the operator allowed) with the port the viewer is bound to, and an `Origin`, where a
browser sends one, must be the viewer's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx
import pytest

from assay.config import Settings
from assay_viewer import Source, create_app

from .conftest import HOSTILE

PORT = 8765

ALLOWED = [
    f"127.0.0.1:{PORT}",
    f"localhost:{PORT}",
    f"LOCALHOST:{PORT}",  # names are case-insensitive
    f"localhost.:{PORT}",  # the same name, fully qualified
    f"127.0.0.2:{PORT}",  # all of 127/8 is loopback
    f"[::1]:{PORT}",
    f"[0:0:0:0:0:0:0:1]:{PORT}",
]
REFUSED = [
    "evil.example",
    f"evil.example:{PORT}",
    f"EVIL.EXAMPLE:{PORT}",
    f"evil.example.:{PORT}",
    f"localhost.evil.example:{PORT}",
    f"127.0.0.1.nip.io:{PORT}",
    f"localhost:{PORT}.evil.example",
    "127.0.0.1",  # no port: port 80, not the bound one
    "localhost",
    "[::1]",
    f"127.0.0.1:{PORT + 1}",
    f"127.0.0.1:0{PORT}",
    f"[::1]:{PORT}x",
    f"::1:{PORT}",  # IPv6 without brackets
    f"evil.example@127.0.0.1:{PORT}",
    f"0.0.0.0:{PORT}",
    f"viewer:{PORT}",
    "",
]


@pytest.fixture
async def app_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The viewer in-process, as if bound to 127.0.0.1:PORT (the Host check needs no log)."""
    source = Source(settings, resamples=10)
    transport = httpx.ASGITransport(app=create_app(source))
    async with httpx.AsyncClient(transport=transport, base_url=f"http://127.0.0.1:{PORT}") as c:
        yield c
    await source.close()


@pytest.mark.parametrize("host", ALLOWED)
async def test_loopback_names_with_the_bound_port_are_served(
    app_client: httpx.AsyncClient, host: str
) -> None:
    r = await app_client.get("/static/view.css", headers={"Host": host})
    assert r.status_code == 200, (host, r.text)


@pytest.mark.parametrize("host", REFUSED)
async def test_any_other_host_is_misdirected(app_client: httpx.AsyncClient, host: str) -> None:
    r = await app_client.get("/static/view.css", headers={"Host": host})
    assert r.status_code == 421, host
    assert "answers only to" in r.text and f"port {PORT}" in r.text
    assert r.headers["content-type"].startswith("text/plain")


async def test_a_request_without_host_is_refused(settings: Settings) -> None:
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/static/view.css",
        "query_string": b"",
        "headers": [],
        "server": ("127.0.0.1", PORT),
        "scheme": "http",
    }
    await create_app(Source(settings, resamples=10))(scope, receive, send)
    assert sent[0]["status"] == 421


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", f"http://evil.example:{PORT}", "null", f"http://localhost:{PORT + 1}"],
)
async def test_a_foreign_origin_is_forbidden_whatever_the_method(
    app_client: httpx.AsyncClient, origin: str
) -> None:
    for method in ("GET", "POST", "DELETE"):
        r = await app_client.request(method, "/static/view.css", headers={"Origin": origin})
        assert r.status_code == 403, (method, origin)
        assert "origin" in r.text.lower()


async def test_the_viewers_own_origin_is_served(app_client: httpx.AsyncClient) -> None:
    for origin in (f"http://127.0.0.1:{PORT}", f"http://localhost:{PORT}"):
        r = await app_client.get("/static/view.css", headers={"Origin": origin})
        assert r.status_code == 200, origin
    # Still only GET and HEAD: nothing in the viewer changes state.
    r = await app_client.post("/", headers={"Origin": f"http://127.0.0.1:{PORT}"})
    assert r.status_code == 405


async def test_an_allowed_name_is_served(settings: Settings) -> None:
    app = create_app(Source(settings, resamples=10), hosts=["Viewer.Lab.Example"])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://127.0.0.1:{PORT}") as c:
        ok = await c.get("/static/view.css", headers={"Host": f"viewer.lab.example:{PORT}"})
        bad = await c.get("/static/view.css", headers={"Host": f"other.lab.example:{PORT}"})
    assert (ok.status_code, bad.status_code) == (200, 421)


async def _raw(served: str, request: str) -> tuple[int, bytes]:
    """One request written by hand (what httpx will not send), its status and body."""
    url = urlsplit(served)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    writer.write(request.replace("PORT", str(url.port)).encode())
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def test_the_served_viewer_refuses_a_rebound_name(served: str) -> None:
    """The finding: a full run page for `Host: evil.example`, through uvicorn."""
    page = f"/run/{HOSTILE}"
    rebound = f"GET {page} HTTP/1.1\r\nHost: evil.example:PORT\r\nConnection: close\r\n\r\n"
    status, body = await _raw(served, rebound)
    assert status == 421 and b"Transcript" not in body
    own = f"GET {page} HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nConnection: close\r\n\r\n"
    status, body = await _raw(served, own)
    assert status == 200 and b"Transcript" in body
    # HTTP/1.0 may leave Host out; the viewer may not then guess.
    status, _ = await _raw(served, f"GET {page} HTTP/1.0\r\n\r\n")
    assert status == 421
    # An absolute-form target names the host the request is for (RFC 9112 3.2.2).
    absolute = (
        f"GET http://evil.example:PORT{page} HTTP/1.1\r\n"
        "Host: 127.0.0.1:PORT\r\nConnection: close\r\n\r\n"
    )
    status, body = await _raw(served, absolute)
    assert status == 421 and b"Transcript" not in body
    absolute_own = absolute.replace("evil.example", "127.0.0.1")
    status, body = await _raw(served, absolute_own)
    assert status == 200 and b"Transcript" in body
