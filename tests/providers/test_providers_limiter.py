"""The adaptive concurrency limiter: a hard cap, halving on 429, additive recovery."""

from __future__ import annotations

import asyncio

import pytest

from assay.providers import (
    AdaptiveLimiter,
    LimiterKey,
    LimiterRegistry,
    RetryPolicy,
)
from assay_testing.scripted import (
    Fault,
    ScriptedModelServer,
    ScriptedSequence,
    ScriptReply,
    ScriptRequest,
)

from .conftest import HELLO, MakeProvider

pytestmark = pytest.mark.usefixtures("answers_fine")


async def _succeed(limiter: AdaptiveLimiter, times: int) -> None:
    for _ in range(times):
        async with limiter.slot():
            pass


async def _rate_limited(limiter: AdaptiveLimiter) -> None:
    async with limiter.slot() as slot:
        slot.rate_limited()


async def test_limit_halves_on_429_and_recovers_additively() -> None:
    limiter = AdaptiveLimiter(8, recovery_successes=3)
    await _rate_limited(limiter)
    assert limiter.limit == 4
    await _rate_limited(limiter)
    await _rate_limited(limiter)
    await _rate_limited(limiter)
    assert limiter.limit == 1  # never below one
    await _succeed(limiter, 2)
    assert limiter.limit == 1
    await _succeed(limiter, 1)
    assert limiter.limit == 2
    await _succeed(limiter, 3 * 10)
    assert limiter.limit == 8  # back to, and never above, the configured max
    assert limiter.decreases == 4


async def test_a_burst_of_429s_shrinks_the_limit_once() -> None:
    limiter = AdaptiveLimiter(8)
    entered = asyncio.Event()
    release = asyncio.Event()
    inside = 0

    async def request() -> None:
        nonlocal inside
        async with limiter.slot() as slot:
            inside += 1
            if inside == 4:
                entered.set()
            await release.wait()
            slot.rate_limited()

    tasks = [asyncio.create_task(request()) for _ in range(4)]
    await entered.wait()
    release.set()
    await asyncio.gather(*tasks)
    # All four were admitted under the same limit: one congestion signal, one halving.
    assert limiter.limit == 4 and limiter.decreases == 1


async def test_in_flight_never_exceeds_the_limit() -> None:
    limiter = AdaptiveLimiter(3)
    peak = 0

    async def request() -> None:
        nonlocal peak
        async with limiter.slot():
            peak = max(peak, limiter.in_flight)
            await asyncio.sleep(0.005)

    await asyncio.gather(*(request() for _ in range(20)))
    assert peak == 3 and limiter.in_flight == 0


async def test_cancelled_waiters_do_not_leak_slots() -> None:
    limiter = AdaptiveLimiter(1)
    hold = asyncio.Event()

    async def holder() -> None:
        async with limiter.slot():
            await hold.wait()

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiter = asyncio.create_task(_succeed(limiter, 1))
    await asyncio.sleep(0)
    waiter.cancel()
    hold.set()
    await first
    await asyncio.gather(waiter, return_exceptions=True)
    assert limiter.in_flight == 0
    await asyncio.wait_for(_succeed(limiter, 1), timeout=1)


def test_registry_shares_one_limiter_per_endpoint_and_model() -> None:
    registry = LimiterRegistry()
    key = LimiterKey("openai", "http://x/v1", "m")
    assert registry.get(key, 4) is registry.get(key, 9)
    assert registry.get(LimiterKey("openai", "http://x/v1", "other"), 4) is not registry.get(key, 4)
    assert registry.snapshot()[key] == 4


async def test_provider_limiter_shrinks_on_429_and_recovers(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    server.inject(model, [Fault.rate_limit(retry_after=0.001)])
    limiter = AdaptiveLimiter(4, recovery_successes=2)
    provider = make(limiter=limiter)
    assert provider.limiter is limiter

    await provider.complete(HELLO)  # 429, then success on the retry
    assert limiter.limit == 2 and limiter.decreases == 1
    await provider.complete(HELLO)
    assert limiter.limit == 3
    for _ in range(2):
        await provider.complete(HELLO)
    assert limiter.limit == 4


async def test_server_errors_leave_the_limit_alone(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    server.inject(model, [Fault.server_error()] * 2)
    limiter = AdaptiveLimiter(4)
    await make(limiter=limiter).complete(HELLO)
    assert limiter.limit == 4 and limiter.decreases == 0


async def test_provider_never_has_more_requests_in_flight_than_the_limit(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    server.set_latency(model, 0.02)
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    limiter = AdaptiveLimiter(2)
    provider = make(limiter=limiter, retry=RetryPolicy.for_tests())
    await asyncio.gather(*(provider.complete(HELLO) for _ in range(6)))
    records = server.requests(model)
    assert len(records) == 6
    # With latency L and at most 2 in flight, 6 requests need at least 3 rounds.
    span = records[-1].received_at - records[0].received_at
    assert span >= 2 * 0.02 * 0.9


async def test_concurrent_calls_share_the_limit_of_their_model(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    in_flight = 0
    peak = 0

    async def slow(request: ScriptRequest) -> ScriptReply:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05)  # long enough for all admitted requests to overlap
        in_flight -= 1
        return ScriptReply(text="ok")

    server.add_script(model, slow)
    first, second = make(max_concurrency=3), make(max_concurrency=3)
    assert first.limiter is second.limiter
    await asyncio.gather(*(p.complete(HELLO) for p in (first, second) for _ in range(5)))
    assert peak == 3
