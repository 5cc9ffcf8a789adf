"""Retries are ours: backoff, Retry-After, give-up as ProviderUnavailable, no retry on 4xx."""

from __future__ import annotations

import random
import socket
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from assay.providers import (
    ProviderConnectionRefused,
    ProviderKind,
    ProviderRequestError,
    ProviderUnavailable,
    RetryEvent,
    RetryPolicy,
    backoff_delay,
    make_provider,
    parse_retry_after,
)
from assay_testing.scripted import Fault, ScriptedModelServer

from .conftest import API_KEY_ENV, HELLO, MakeProvider

pytestmark = pytest.mark.usefixtures("answers_fine")


async def test_429_storm_is_ridden_out_honouring_retry_after(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    server.inject(model, [Fault.rate_limit(retry_after=0.03)] * 3 + [Fault.rate_limit()])
    events: list[RetryEvent] = []
    provider = make(retry=RetryPolicy.for_tests(max_attempts=6), on_retry=events.append)

    done = await provider.complete(HELLO)

    assert done.text == "fine" and done.attempts == 5
    assert [e.status_code for e in events] == [429] * 4
    assert [e.retry_after_s for e in events] == [0.03, 0.03, 0.03, None]
    # Never earlier than the server asked; without a header, plain (tiny) backoff.
    assert all(e.delay_s >= 0.03 for e in events[:3])
    assert events[3].delay_s < 0.03
    assert list(provider.retry_events) == events
    # One HTTP request per attempt: the SDK's own retries are really off.
    assert len(server.requests(model)) == 5


async def test_retry_after_as_http_date_is_honoured(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    # Dates have whole-second resolution: ask for 3 s so at least 2 s remain when parsed.
    server.inject(model, [Fault.rate_limit(retry_after=3, http_date=True)])
    sleeps: list[float] = []
    provider = make(on_retry=lambda e: sleeps.append(e.delay_s))
    # The cap keeps the test fast and makes the expected delay exact.
    provider.retry = RetryPolicy.for_tests().model_copy(update={"max_retry_after_s": 0.05})
    await provider.complete(HELLO)
    assert sleeps == [0.05]


async def test_server_errors_are_retried(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    server.inject(
        model, [Fault.server_error(500), Fault.server_error(503), Fault.server_error(529)]
    )
    provider = make()
    done = await provider.complete(HELLO)
    assert done.attempts == 4
    assert [e.status_code for e in provider.retry_events] == [500, 503, 529]
    assert {e.kind for e in provider.retry_events} == {"server_error"}


def test_backoff_grows_and_is_deterministic_with_a_seed() -> None:
    policy = RetryPolicy(base_delay_s=1.0, multiplier=2.0, max_delay_s=5.0, jitter=0.5, seed=7)
    first = [backoff_delay(policy, n, random.Random(policy.seed)) for n in range(1, 5)]
    again = [backoff_delay(policy, n, random.Random(policy.seed)) for n in range(1, 5)]
    assert first == again
    for n, delay in enumerate(first, start=1):
        cap = min(5.0, 2.0 ** (n - 1))
        assert cap * 0.5 <= delay <= cap


def test_parse_retry_after_forms() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"retry-after": later}, now=now) == 30.0
    past = format_datetime(now - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"retry-after": past}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


async def test_timeouts_are_retried_then_unavailable(
    server: ScriptedModelServer, make: MakeProvider, model: str, kind: ProviderKind
) -> None:
    server.fail_always(model, Fault.timeout(hold_s=1.0))
    provider = make(timeout_s=0.15, retry=RetryPolicy.for_tests(max_attempts=3))
    with pytest.raises(ProviderUnavailable) as caught:
        await provider.complete(HELLO)
    err = caught.value
    assert err.attempts == 3 and err.last_error.kind == "timeout"
    assert err.infrastructure
    assert kind in str(err) and model in str(err) and "timed out" in str(err)
    assert [r.fault for r in server.requests(model)] == ["timeout"] * 3


async def test_a_timeout_then_success(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    server.inject(model, [Fault.timeout(hold_s=1.0)])
    done = await make(timeout_s=0.15).complete(HELLO)
    assert done.text == "fine" and done.attempts == 2


@pytest.mark.parametrize("body", ["invalid_json", "missing_fields"])
async def test_malformed_bodies_are_retried(
    server: ScriptedModelServer, make: MakeProvider, model: str, body: str
) -> None:
    server.inject(model, [Fault.malformed(body)])  # type: ignore[arg-type]
    provider = make()
    done = await provider.complete(HELLO)
    assert done.text == "fine" and done.attempts == 2
    assert [e.kind for e in provider.retry_events] == ["malformed"]


async def test_persistently_malformed_gives_up_early(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    server.fail_always(model, Fault.malformed("missing_fields"))
    policy = RetryPolicy.for_tests(max_attempts=6).model_copy(update={"max_malformed_attempts": 2})
    with pytest.raises(ProviderUnavailable) as caught:
        await make(retry=policy).complete(HELLO)
    assert caught.value.attempts == 2 and caught.value.last_error.kind == "malformed"
    assert len(server.requests(model)) == 2


async def test_dead_provider_is_unavailable_after_n_attempts(
    server: ScriptedModelServer, make: MakeProvider, model: str, kind: ProviderKind
) -> None:
    server.fail_always(model, Fault.server_error(503))
    with pytest.raises(ProviderUnavailable) as caught:
        await make(retry=RetryPolicy.for_tests(max_attempts=4)).complete(HELLO)
    err = caught.value
    assert err.attempts == 4 and err.provider == kind and err.model == model
    assert "503" in str(err) and err.infrastructure
    assert len(server.requests(model)) == 4
    server.heal(model)
    assert (await make().complete(HELLO)).text == "fine"


@pytest.mark.parametrize(("status", "infrastructure"), [(400, False), (401, True), (404, True)])
async def test_client_errors_are_not_retried(
    server: ScriptedModelServer,
    make: MakeProvider,
    model: str,
    status: int,
    infrastructure: bool,
) -> None:
    server.inject(model, [Fault.status_code(status, "nope")])
    provider = make()
    with pytest.raises(ProviderRequestError) as caught:
        await provider.complete(HELLO)
    assert caught.value.status_code == status
    assert caught.value.infrastructure is infrastructure
    assert len(server.requests(model)) == 1 and not provider.retry_events


async def test_wrong_api_key_is_a_401_not_retried(
    server: ScriptedModelServer, model: str, kind: ProviderKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_TEST_WRONG_KEY", "sk-wrong")
    base_url = server.openai_base_url if kind == "openai" else server.base_url
    provider = make_provider(
        kind,
        model,
        base_url=base_url,
        api_key_env="ASSAY_TEST_WRONG_KEY",
        retry=RetryPolicy.for_tests(),
    )
    try:
        with pytest.raises(ProviderRequestError, match="401"):
            await provider.complete(HELLO)
    finally:
        await provider.aclose()
    assert [r.status for r in server.requests(model)] == [401]


async def test_connection_refused_is_retried_then_unavailable(
    server: ScriptedModelServer, kind: ProviderKind
) -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    suffix = "/v1" if kind == "openai" else ""
    provider = make_provider(
        kind,
        "nobody",
        base_url=f"http://127.0.0.1:{port}{suffix}",
        api_key_env=API_KEY_ENV,
        retry=RetryPolicy.for_tests(max_attempts=2),
    )
    try:
        with pytest.raises(ProviderUnavailable) as caught:
            await provider.complete(HELLO)
    finally:
        await provider.aclose()
    assert caught.value.last_error.kind == "connection"


async def test_a_refused_connection_gives_up_after_few_attempts(kind: ProviderKind) -> None:
    """A refused local model port took 6 attempts (about 12 s) to be reported: a refusal
    is answered at once, so it gets `max_refused_attempts` however many others get."""
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    suffix = "/v1" if kind == "openai" else ""
    policy = RetryPolicy.for_tests(max_attempts=6)
    provider = make_provider(
        kind,
        "nobody",
        base_url=f"http://127.0.0.1:{port}{suffix}",
        api_key_env=API_KEY_ENV,
        retry=policy,
    )
    try:
        with pytest.raises(ProviderUnavailable) as caught:
            await provider.complete(HELLO)
    finally:
        await provider.aclose()
    assert policy.max_refused_attempts == 3 < policy.max_attempts
    assert caught.value.attempts == 3
    assert isinstance(caught.value.last_error, ProviderConnectionRefused)
    assert caught.value.last_error.kind == "connection"
    assert [e.attempt for e in provider.retry_events] == [1, 2]
