"""Fixtures: one scripted model server per session, providers built through the factory."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from assay.providers import ProviderKind, RetryPolicy, SdkProvider, UserMessage, make_provider
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence

API_KEY_ENV = "ASSAY_TEST_SCRIPTED_KEY"
API_KEY = "sk-scripted-test"
_names = itertools.count()

MakeProvider = Callable[..., SdkProvider]
HELLO = [UserMessage(content="hello")]


@pytest.fixture(scope="session")
def server() -> Iterator[ScriptedModelServer]:
    """The real HTTP server both SDKs talk to; it demands the test key like a real API."""
    os.environ[API_KEY_ENV] = API_KEY
    with ScriptedModelServer(require_api_key=API_KEY, prompt_cache=True) as srv:
        yield srv


@pytest.fixture
def model() -> str:
    """A model name no other test uses: scripts, faults and limiters stay per test."""
    return f"scripted-{next(_names)}"


@pytest.fixture
def answers_fine(server: ScriptedModelServer, model: str) -> None:
    """The test's model answers "fine" to every request (faults aside)."""
    server.add_script(model, ScriptedSequence(["fine"], repeat_last=True))


@pytest.fixture(params=["openai", "anthropic"])
def kind(request: pytest.FixtureRequest) -> ProviderKind:
    """Every provider test runs against both implementations."""
    value: ProviderKind = request.param
    return value


def base_url_for(server: ScriptedModelServer, kind: ProviderKind) -> str:
    return server.openai_base_url if kind == "openai" else server.base_url


@pytest.fixture
async def make(
    server: ScriptedModelServer, kind: ProviderKind, model: str
) -> AsyncIterator[MakeProvider]:
    """Build providers for this test's kind and model (fast deterministic retries)."""
    built: list[SdkProvider] = []

    def factory(**overrides: Any) -> SdkProvider:
        options: dict[str, Any] = {
            "base_url": base_url_for(server, kind),
            "api_key_env": API_KEY_ENV,
            "timeout_s": 5.0,
            "retry": RetryPolicy.for_tests(),
            **overrides,
        }
        provider = make_provider(kind, model, **options)
        built.append(provider)
        return provider

    yield factory
    for provider in built:
        await provider.aclose()
