"""One guarded GET: every hop checked and pinned, the body streamed under a byte cap.

Nothing of the runner's own network identity goes out: no proxy from the environment
(httpcore reads none), no cookies or credentials (no jar; redirects carry only the fixed
headers), one fixed User-Agent, and no compressed bodies (the cap counts the bytes that
are kept, so no decompression bomb).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import NamedTuple
from urllib.parse import urljoin

import httpcore

from ._guard import NetPolicy, PinnedBackend, Target, WebRefused

__all__ = ["USER_AGENT", "Fetched", "guarded_get"]

USER_AGENT = "Assay-web/1.0 (research agent evaluation; +https://github.com/assay)"
_REDIRECTS = {301, 302, 303, 307, 308}
_CHUNK_WAIT_S = 10.0


class Fetched(NamedTuple):
    """What one guarded GET received."""

    url: str
    """The URL that answered (the last hop)."""
    status: int
    media_type: str
    charset: str | None
    body: bytes
    truncated: bool
    """Cut at the byte cap or at the deadline."""


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for k, v in headers:
        if k.lower() == name:
            return v.decode("latin-1")
    return None


def _content_type(value: str | None) -> tuple[str, str | None]:
    if not value:
        return "", None
    media, _, params = value.partition(";")
    charset = None
    for p in params.split(";"):
        k, _, v = p.strip().partition("=")
        if k.lower() == "charset" and v:
            charset = v.strip().strip('"')[:40]
    return media.strip().lower()[:100], charset


async def _one(
    target: Target,
    tls: ssl.SSLContext,
    extra: dict[str, str],
    max_bytes: int,
    readable: frozenset[str] | None,
) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
    """One hop to the pinned address; a body only for a readable type, cut at max_bytes."""
    path = target.parts.path or "/"
    if target.parts.query:
        path += "?" + target.parts.query
    default = 443 if target.parts.scheme == "https" else 80
    host = target.host if target.port == default else f"{target.host}:{target.port}"
    headers = {
        "Host": host,
        "User-Agent": USER_AGENT,
        "Accept": "text/html,application/xhtml+xml,application/pdf,text/plain,application/json;q=0.9,*/*;q=0.5",
        "Accept-Encoding": "identity",
        **extra,
    }
    url = httpcore.URL(
        scheme=target.parts.scheme.encode(),
        host=target.host.encode(),
        port=target.port,
        target=path.encode(),
    )
    timeouts = {"connect": _CHUNK_WAIT_S, "read": _CHUNK_WAIT_S, "write": _CHUNK_WAIT_S}
    async with (
        httpcore.AsyncConnectionPool(
            ssl_context=tls,
            network_backend=PinnedBackend(target.address),
            max_connections=1,
            retries=0,
        ) as pool,
        pool.stream(
            "GET", url, headers=list(headers.items()), extensions={"timeout": timeouts}
        ) as response,
    ):
        media, _ = _content_type(_header(response.headers, b"content-type"))
        if response.status in _REDIRECTS or (readable is not None and media not in readable):
            return response.status, response.headers, b"", False
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_stream():
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                return response.status, response.headers, b"".join(chunks)[:max_bytes], True
        return response.status, response.headers, b"".join(chunks), False


async def guarded_get(
    url: str,
    policy: NetPolicy,
    *,
    max_bytes: int,
    timeout_s: float,
    max_redirects: int,
    headers: dict[str, str] | None = None,
    readable: frozenset[str] | None = None,
    trusted: bool = False,
) -> Fetched:
    """GET url through the guard, following at most max_redirects checked redirects.

    `headers` go to the first hop only (an API key never follows a redirect). Raises
    WebRefused (the guard's reasons, and network failures) with a message for the agent.
    """
    deadline = time.monotonic() + timeout_s
    tls = policy.tls or ssl.create_default_context()
    extra = dict(headers or {})
    current = url
    for hop in range(max_redirects + 1):
        target = await asyncio.wait_for(
            policy.check(current, trusted=trusted), max(0.01, deadline - time.monotonic())
        )
        try:
            async with asyncio.timeout(max(0.01, deadline - time.monotonic())):
                status, answer_headers, body, cut = await _one(
                    target, tls, extra, max_bytes, readable
                )
        except TimeoutError as e:
            raise WebRefused(
                f"fetch of {current} stopped: no complete answer within {timeout_s:g} s"
            ) from e
        except (httpcore.ProtocolError, httpcore.NetworkError, httpcore.TimeoutException) as e:
            raise WebRefused(f"fetch of {current} failed: {type(e).__name__}: {e}") from e
        except ssl.SSLError as e:
            raise WebRefused(f"fetch of {current} failed: TLS error: {e}") from e
        except OSError as e:
            raise WebRefused(f"fetch of {current} failed: {e}") from e
        location = _header(answer_headers, b"location")
        if status in _REDIRECTS and location:
            if hop == max_redirects:
                raise WebRefused(f"refused: more than {max_redirects} redirects from {url}")
            current = urljoin(current, location.strip())
            extra = {}
            continue
        encoding = (_header(answer_headers, b"content-encoding") or "identity").strip().lower()
        if encoding != "identity":  # asked for identity: a compressed body is not unpacked
            raise WebRefused(f"not read: {current} sent a {encoding[:40]}-encoded body")
        media, charset = _content_type(_header(answer_headers, b"content-type"))
        return Fetched(current, status, media, charset, body, cut)
    raise WebRefused(f"refused: more than {max_redirects} redirects from {url}")
