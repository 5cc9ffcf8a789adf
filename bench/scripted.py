"""The scripted model server's own cost: a zero-latency reply through the real SDKs.

Each row is the p50 of one SDK call (OpenAI chat completion, Anthropic message) answered
by the scripted server, against the same call answered by a bare server of the same HTTP
stack (h11 on asyncio, in its own thread) that returns a canned body: the difference is
what routing, parsing, the script and the records cost.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Self

from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from assay.http11 import HttpRequest, HttpResponse, serve_connection
from assay.lifecycle import Startable
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence

from .table import Row, percentile

__all__ = ["bench_scripted"]

_CALLS = 300
_WARM = 30
_OPENAI_REPLY = {
    "id": "chatcmpl_bare",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "ok", "refusal": None},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
_ANTHROPIC_REPLY = {
    "id": "msg_bare",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
_CANNED = {
    "/v1/chat/completions": HttpResponse(200, json.dumps(_OPENAI_REPLY).encode()),
    "/v1/messages": HttpResponse(200, json.dumps(_ANTHROPIC_REPLY).encode()),
}


class _BareServer(Startable):
    """The same HTTP stack with a canned answer per route, on its own thread and loop."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.base_url = ""

    async def _answer(self, request: HttpRequest) -> HttpResponse:
        return _CANNED[request.path]

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(
            lambda r, w: serve_connection(r, w, self._answer), "127.0.0.1", 0
        )

    def start(self) -> Self:
        """Serve on a free loopback port."""
        self._thread.start()
        server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result()
        self.base_url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return self

    def stop(self) -> None:
        """Stop the loop and join its thread."""
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()


async def _paired_p50(
    scripted: Callable[[], Awaitable[Any]], bare: Callable[[], Awaitable[Any]]
) -> tuple[float, float]:
    """p50 ms of each call, alternated so that load on the machine hits both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(_CALLS + _WARM):
        for call, into in ((scripted, times[0]), (bare, times[1])):
            t0 = time.perf_counter()
            await call()
            if i >= _WARM:
                into.append((time.perf_counter() - t0) * 1000)
    return percentile(times[0], 50), percentile(times[1], 50)


async def _sdk_calls(scripted_url: str, bare_url: str) -> list[tuple[float, float]]:
    """(scripted, bare) p50 ms of one OpenAI and one Anthropic call."""
    message: Any = [{"role": "user", "content": "hi"}]
    clients = [
        (
            AsyncOpenAI(base_url=f"{url}/v1", api_key="bench", max_retries=0),
            AsyncAnthropic(base_url=url, api_key="bench", max_retries=0),
        )
        for url in (scripted_url, bare_url)
    ]
    (oa, an), (bare_oa, bare_an) = clients
    try:
        return [
            await _paired_p50(
                lambda: oa.chat.completions.create(model="m", messages=message),
                lambda: bare_oa.chat.completions.create(model="m", messages=message),
            ),
            await _paired_p50(
                lambda: an.messages.create(model="m", max_tokens=16, messages=message),
                lambda: bare_an.messages.create(model="m", max_tokens=16, messages=message),
            ),
        ]
    finally:
        for pair in clients:
            await pair[0].close()
            await pair[1].close()


def bench_scripted() -> list[Row]:
    """Scripted-server reply p50 through each SDK, against a bare server's."""
    # Every call is turn 0 of a fresh conversation: the same one-line reply each time.
    with ScriptedModelServer({"m": ScriptedSequence(["ok"])}) as scripted, _BareServer() as bare:
        (chat, bare_chat), (msg, bare_msg) = asyncio.run(
            _sdk_calls(scripted.base_url, bare.base_url)
        )
    g = "scripted"
    base = "same SDK call, bare h11 server"
    return [
        Row(g, "zero-latency reply p50, OpenAI SDK", chat, "ms", bare_chat, base, "≤ 3 ms"),
        Row(g, "zero-latency reply p50, Anthropic SDK", msg, "ms", bare_msg, base, "≤ 3 ms"),
    ]
