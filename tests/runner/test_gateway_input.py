"""Attacks on the model gateway's own door: what a program in the sandbox may send it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from assay.http11 import MAX_HEAD
from assay_runner.gateway import _MAX_BODY, SOCKET_NAME
from assay_schemas import AgentSpec, AgentStepLogged
from tests.gateways import serving


async def _never_logged(fields: dict[str, Any]) -> AgentStepLogged:
    raise AssertionError("no refused request reaches the model")


@pytest.fixture
async def socket_path(tmp_path: Path) -> AsyncIterator[Path]:
    agent = AgentSpec(agent_id="a", model="m", base_url="http://127.0.0.1:9/v1")
    async with serving(tmp_path, agent, _never_logged):
        yield tmp_path / SOCKET_NAME


async def _send(path: Path, data: bytes) -> bytes:
    """What the gateway answers to `data` before it hangs up (within 5 s)."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


async def test_a_body_declared_over_the_cap_is_refused_before_it_is_read(
    socket_path: Path,
) -> None:
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Length: {_MAX_BODY + 1}\r\n\r\n"
    )
    answer = await _send(socket_path, head.encode())  # the body is never sent
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert b"request body over" in answer


async def test_a_chunked_body_over_the_cap_is_refused(socket_path: Path) -> None:
    chunk = b"x" * (1024 * 1024)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n"
    _, writer = await asyncio.open_unix_connection(str(socket_path))
    writer.write(head)
    # The gateway stops reading past the cap and hangs up: the sender cannot finish.
    with pytest.raises(ConnectionError):
        for _ in range(_MAX_BODY // len(chunk) + 2):
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await asyncio.wait_for(writer.drain(), 5)
    writer.close()
    # Its 413 may be lost to the reset of the unread bytes; the gateway itself serves on.
    ok = b"GET / HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"
    assert (await _send(socket_path, ok)).startswith(b"HTTP/1.1 404 ")


async def test_a_head_over_the_cap_is_refused(socket_path: Path) -> None:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nX-Pad: " + b"a" * MAX_HEAD
    assert (await _send(socket_path, head)).startswith(b"HTTP/1.1 431 ")


@pytest.mark.parametrize(
    "head",
    [
        b"GARBAGE\r\n\r\n",  # no method, path, version
        b"POST / HTTP/1.1\r\nHost: g\r\nContent-Length: many\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",  # HTTP/1.1 without a Host
    ],
)
async def test_malformed_requests_are_refused_and_the_gateway_serves_on(
    socket_path: Path, head: bytes
) -> None:
    assert (await _send(socket_path, head)).startswith(b"HTTP/1.1 400 ")
    # The next connection is served as usual (here: a route the gateway does not serve).
    ok = b"GET /v1/models HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"
    assert (await _send(socket_path, ok)).startswith(b"HTTP/1.1 404 ")


async def test_a_program_hanging_up_mid_body_ends_only_its_connection(
    socket_path: Path,
) -> None:
    short = b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Length: 10\r\n\r\nshort"
    reader, writer = await asyncio.open_unix_connection(str(socket_path))
    writer.write(short)
    writer.write_eof()
    answer = await asyncio.wait_for(reader.read(), 5)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400 ")
    ok = b"GET / HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n"
    assert (await _send(socket_path, ok)).startswith(b"HTTP/1.1 404 ")
