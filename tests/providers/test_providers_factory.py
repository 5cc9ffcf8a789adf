"""The factory, the spec that is safe to log, the Protocol and the public exports."""

from __future__ import annotations

import importlib

import pytest

import assay.providers
from assay.providers import (
    AnthropicProvider,
    ModelProvider,
    OpenAIProvider,
    ProviderConfigError,
    ProviderError,
    ProviderKind,
    ProviderSpec,
    RetryPolicy,
    UserMessage,
    make_provider,
)
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence

from .conftest import API_KEY, API_KEY_ENV


def test_missing_key_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASSAY_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(ProviderConfigError, match="ASSAY_TEST_NO_SUCH_KEY") as caught:
        make_provider("openai", "gpt-4o", api_key_env="ASSAY_TEST_NO_SUCH_KEY")
    assert caught.value.infrastructure and "gpt-4o" in str(caught.value)
    assert isinstance(caught.value, ProviderError)


async def test_spec_builds_a_provider_and_never_holds_the_key(
    server: ScriptedModelServer, model: str
) -> None:
    server.add_script(model, ScriptedSequence(["hi from spec"]))
    spec = ProviderSpec(
        kind="anthropic",
        model=model,
        base_url=server.base_url,
        api_key_env=API_KEY_ENV,
        retry=RetryPolicy.for_tests(),
    )
    dumped = spec.model_dump_json()
    assert API_KEY not in dumped and API_KEY_ENV in dumped
    assert ProviderSpec.model_validate_json(dumped) == spec

    provider = spec.build()
    try:
        assert isinstance(provider, AnthropicProvider)
        assert isinstance(provider, ModelProvider)
        assert API_KEY not in repr(provider)
        done = await provider.complete([UserMessage(content="hello")])
        assert done.text == "hi from spec"
    finally:
        await provider.aclose()


async def test_both_kinds_satisfy_the_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_TEST_ANY_KEY", "sk-any")
    kinds: list[tuple[ProviderKind, type]] = [
        ("openai", OpenAIProvider),
        ("anthropic", AnthropicProvider),
    ]
    for kind, cls in kinds:
        provider = make_provider(
            kind, "m", base_url="http://127.0.0.1:9", api_key_env="ASSAY_TEST_ANY_KEY"
        )
        try:
            assert isinstance(provider, cls) and isinstance(provider, ModelProvider)
            assert provider.kind == kind and provider.model == "m"
        finally:
            await provider.aclose()


@pytest.mark.parametrize("package", ["assay.providers", "assay_testing.scripted"])
def test_exports_are_explicit_and_importable(package: str) -> None:
    module = importlib.import_module(package)
    exported = module.__all__
    assert sorted(exported) == sorted(set(exported))
    for name in exported:
        assert hasattr(module, name), name
    public = {n for n in vars(module) if not n.startswith("_")} - {"annotations"}
    submodules = {n for n in public if type(getattr(module, n)).__name__ == "module"}
    assert public - submodules == set(exported)


def test_provider_error_tree() -> None:
    for name in ("ProviderConfigError", "ProviderRequestError", "ProviderUnavailable"):
        assert issubclass(getattr(assay.providers, name), ProviderError)
