"""The floor under the runner's CPU per agent step: one model call through the SDK, alone.

Every agent step is one model call, and the runner makes it with the OpenAI SDK (its
aiohttp client), as users run it. Measured here in a process doing nothing else, against
the same scripted model server: the runner's provider (`OpenAIProvider.complete`: the
request built from the run's messages, the SDK's `post`, the answer read, its GenAI span),
beside the SDK's own `chat.completions.create` as Inspect AI calls it, with the garbage
collector tuned as every service tunes it once started (`assay.service.settle_heap`).
What the platform spends per step beyond this is orchestration: the log, the sandbox,
the fold.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import openai

from assay.providers import OpenAIProvider
from assay.providers._models import GenerationParams, SystemMessage, UserMessage
from assay.providers._openai_wire import to_openai_messages
from assay.service import settle_heap
from assay_runner.tools import TOOLS

__all__ = ["ModelFloor", "model_floor"]

_WARM = 100
"""Calls before measuring: connections opened, code paths warmed."""


class ModelFloor(NamedTuple):
    """CPU milliseconds per call of this process: the runner's provider, the bare SDK."""

    provider_ms: float
    sdk_create_ms: float

    @staticmethod
    def mean(first: ModelFloor, second: ModelFloor) -> ModelFloor:
        """The two measurements' mean (one before a run, one after it)."""
        return ModelFloor(
            (first.provider_ms + second.provider_ms) / 2,
            (first.sdk_create_ms + second.sdk_create_ms) / 2,
        )


async def _per_call(calls: int, concurrency: int, one: Callable[[], Awaitable[None]]) -> float:
    slots = asyncio.Semaphore(concurrency)

    async def slot() -> None:
        async with slots:
            await one()

    await asyncio.gather(*(slot() for _ in range(_WARM)))
    t0 = time.process_time()
    await asyncio.gather(*(slot() for _ in range(calls)))
    return (time.process_time() - t0) / calls * 1000


async def _measure(base_url: str, model: str, calls: int, concurrency: int) -> ModelFloor:
    provider = OpenAIProvider(
        model=model, api_key="scripted", base_url=base_url, max_concurrency=concurrency
    )
    messages = (SystemMessage(text="You are a careful analyst."), UserMessage(content="go"))
    params = GenerationParams(max_tokens=256)
    sdk = openai.AsyncOpenAI(
        api_key="scripted",
        base_url=base_url,
        max_retries=0,
        http_client=openai.DefaultAioHttpClient(),
    )
    try:

        async def via_provider() -> None:
            await provider.complete(messages, TOOLS, params)

        wire: list[Any] = to_openai_messages(messages)

        async def via_sdk() -> None:
            await sdk.chat.completions.create(model=model, messages=wire, max_completion_tokens=256)

        # The collector tuned as in the runner, which this is the floor of; as it was after,
        # for whatever else this process measures.
        threshold = gc.get_threshold()
        settle_heap()
        try:
            ours = await _per_call(calls, concurrency, via_provider)
            theirs = await _per_call(calls, concurrency, via_sdk)
        finally:
            gc.unfreeze()
            gc.set_threshold(*threshold)
    finally:
        await provider.aclose()
        await sdk.close()
    return ModelFloor(ours, theirs)


def model_floor(base_url: str, model: str, *, calls: int, concurrency: int) -> ModelFloor:
    """Measure both, `calls` each, `concurrency` at a time (the server's latency only
    stretches the wall; the CPU per call is what is kept)."""
    return asyncio.run(_measure(base_url, model, calls, concurrency))
