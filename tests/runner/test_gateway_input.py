"""Attacks on the model gateway's own door: what a program in the sandbox may send it."""

from __future__ import annotations

import asyncio

import pytest

from assay_runner.gateway import _MAX_BODY, _read_request


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


async def test_a_body_declared_over_the_cap_is_refused_before_it_is_read() -> None:
    head = f"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {_MAX_BODY + 1}\r\n\r\n"
    with pytest.raises(ValueError, match="too large"):
        await _read_request(_reader(head.encode()))


@pytest.mark.parametrize(
    "head",
    [
        b"GARBAGE\r\n\r\n",  # no method, path, version
        b"POST / HTTP/1.1\r\nContent-Length: many\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort",  # the program hangs up early
    ],
)
async def test_malformed_requests_end_the_connection_not_the_gateway(head: bytes) -> None:
    # _serve treats these errors as the end of that connection; none is anything else.
    with pytest.raises((ValueError, asyncio.IncompleteReadError)):
        await _read_request(_reader(head))
