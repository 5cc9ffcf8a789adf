"""Our own retry policy around SDK calls: exponential backoff, jitter, Retry-After.

The SDKs' built-in retries are disabled (`max_retries=0`) so that every attempt, every
delay and the final give-up are decided here, where they can be observed and tested.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Generic, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ._errors import (
    ProviderConnectionRefused,
    ProviderTransientError,
    ProviderUnavailable,
    TransientKind,
)

__all__ = [
    "Retried",
    "RetryEvent",
    "RetryPolicy",
    "backoff_delay",
    "parse_retry_after",
    "run_with_retries",
]

log = logging.getLogger(__name__)

T = TypeVar("T")


class RetryPolicy(BaseModel):
    """How often and how patiently to retry transient failures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_attempts: int = Field(default=6, ge=1)
    """Attempts in total, the first one included."""
    base_delay_s: float = Field(default=0.5, ge=0)
    """Backoff before the first retry; multiplied by `multiplier` after each failure."""
    multiplier: float = Field(default=2.0, ge=1)
    max_delay_s: float = Field(default=30.0, ge=0)
    jitter: float = Field(default=0.5, ge=0, le=1)
    """Fraction of each backoff delay drawn at random, so clients that failed together
    do not retry together."""
    max_retry_after_s: float = Field(default=120.0, ge=0)
    """Cap on a server's Retry-After, so a bogus header cannot stall a run for hours."""
    max_malformed_attempts: int = Field(default=3, ge=1)
    """Attempts allowed when the body is malformed: a broken endpoint rarely heals fast."""
    max_refused_attempts: int = Field(default=3, ge=1)
    """Attempts allowed when the connection is refused (nothing listens at the port, often
    a local model server not started): each refusal comes at once, so the full backoff
    only made a user wait (6 attempts, about 12 s) for an answer known at the first one;
    three still ride out a server restarting (about 1.5 s of backoff)."""
    seed: int | None = None
    """Seed for the jitter; set it in tests for reproducible delays."""

    @classmethod
    def for_tests(cls, *, max_attempts: int = 4, seed: int = 0) -> RetryPolicy:
        """Deterministic and fast: tiny delays, seeded jitter."""
        return cls(
            max_attempts=max_attempts,
            base_delay_s=0.001,
            max_delay_s=0.01,
            max_retry_after_s=1.0,
            seed=seed,
        )


class RetryEvent(NamedTuple):
    """One decision to retry, recorded for metrics and tests."""

    provider: str
    model: str
    attempt: int
    """The attempt that failed (1-based)."""
    kind: TransientKind
    status_code: int | None
    retry_after_s: float | None
    """What the server asked for, if anything."""
    delay_s: float
    """How long we waited before the next attempt."""


class Retried(NamedTuple, Generic[T]):
    """A successful result and the attempts it took."""

    value: T
    attempts: int


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def backoff_delay(policy: RetryPolicy, attempt: int, rng: random.Random) -> float:
    """Jittered exponential backoff after failed attempt number `attempt` (1-based)."""
    raw = min(policy.max_delay_s, policy.base_delay_s * policy.multiplier ** (attempt - 1))
    return raw * (1.0 - policy.jitter * rng.random())


async def run_with_retries(
    attempt_fn: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    rng: random.Random,
    provider: str,
    model: str,
    on_retry: Callable[[RetryEvent], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Retried[T]:
    """Call `attempt_fn` until it succeeds; return its result and the attempts used.

    Only `ProviderTransientError` is retried; anything else propagates at once.
    Raises `ProviderUnavailable` when the attempts allowed for the failure kind run out.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return Retried(await attempt_fn(), attempt)
        except ProviderTransientError as err:
            limit = policy.max_attempts
            if err.kind == "malformed":
                limit = min(limit, policy.max_malformed_attempts)
            if isinstance(err, ProviderConnectionRefused):
                limit = min(limit, policy.max_refused_attempts)
            if attempt >= limit:
                raise ProviderUnavailable(
                    provider=provider, model=model, attempts=attempt, last_error=err
                ) from err
            delay = backoff_delay(policy, attempt, rng)
            if err.retry_after_s is not None:
                # Honour the server: never come back earlier than it asked.
                delay = max(delay, min(err.retry_after_s, policy.max_retry_after_s))
            event = RetryEvent(
                provider, model, attempt, err.kind, err.status_code, err.retry_after_s, delay
            )
            log.info(
                "retrying %s model %r after attempt %d (%s, status %s) in %.3fs",
                provider,
                model,
                attempt,
                err.kind,
                err.status_code,
                delay,
            )
            if on_retry is not None:
                on_retry(event)
            await sleep(delay)


def monotonic_ms() -> float:
    """Milliseconds on the monotonic clock (latency measurements)."""
    return time.perf_counter() * 1000.0
