"""Build a provider from a serializable spec; the API key comes from the environment."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Literal, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, Field

from assay_schemas import ModelSpec

from ._anthropic import AnthropicProvider
from ._base import SdkProvider
from ._errors import ProviderConfigError
from ._limiter import AdaptiveLimiter
from ._openai import OpenAIProvider
from ._prompt_cache import resolve_cache_prompt
from ._retry import RetryEvent, RetryPolicy

__all__ = [
    "DEFAULT_KEY_ENV",
    "ProviderKind",
    "ProviderOptions",
    "ProviderSpec",
    "make_provider",
    "provider_for",
]

ProviderKind = Literal["openai", "anthropic"]
"""The API families we speak."""


class ProviderSpec(BaseModel):
    """Everything needed to reach a model, safe to log: it names the key's variable only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ProviderKind
    model: str
    base_url: str | None = None
    """None means the vendor's public endpoint."""
    api_key_env: str = Field(min_length=1)
    """Name of the environment variable holding the API key (never the key itself)."""
    timeout_s: float = Field(default=120.0, gt=0)
    max_concurrency: int = Field(default=8, ge=1)
    retry: RetryPolicy = RetryPolicy()
    cache_prompt: bool = True
    """Whether requests carry prompt-cache marks."""

    def build(
        self,
        *,
        limiter: AdaptiveLimiter | None = None,
        on_retry: Callable[[RetryEvent], None] | None = None,
    ) -> SdkProvider:
        """The provider this spec describes (reads the API key now)."""
        # The spec's fields are make_provider's arguments, under the same names.
        return make_provider(**dict(self), limiter=limiter, on_retry=on_retry)


_PROVIDER_CLASSES: dict[str, type[SdkProvider]] = {
    "openai": OpenAIProvider,
    "anthropic": AnthropicProvider,
}


class ProviderOptions(TypedDict, total=False):
    """`SdkProvider`'s keyword arguments besides model and key; left out, its defaults apply."""

    base_url: str | None
    timeout_s: float
    max_concurrency: int
    retry: RetryPolicy | None
    limiter: AdaptiveLimiter | None
    on_retry: Callable[[RetryEvent], None] | None
    cache_prompt: bool


def make_provider(
    kind: ProviderKind, model: str, *, api_key_env: str, **options: Unpack[ProviderOptions]
) -> SdkProvider:
    """Build an `OpenAIProvider` or `AnthropicProvider`.

    Without an explicit `limiter`, the provider shares the process-wide limiter of its
    (kind, base_url, model), created with `max_concurrency` on first use.
    """
    api_key = os.environ.get(api_key_env)
    if not api_key:
        raise ProviderConfigError(
            f"environment variable {api_key_env!r} holding the API key is not set",
            provider=kind,
            model=model,
        )
    provider_class = _PROVIDER_CLASSES.get(kind)
    if provider_class is None:
        raise ProviderConfigError(
            f"unknown provider kind {kind!r}", provider=str(kind), model=model
        )
    return provider_class(model=model, api_key=api_key, **options)


DEFAULT_KEY_ENV: dict[str, str] = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
"""The vendor's usual key variable, when a spec names none."""


def provider_for(
    spec: ModelSpec, *, retry: RetryPolicy | None = None, limiter: AdaptiveLimiter | None = None
) -> SdkProvider:
    """The provider an agent or judge spec describes; its key is read from the env var it names.

    Without `limiter` it shares the process-wide limiter of its model, so agents and judges
    on one model respect one concurrency limit.
    """
    env = spec.api_key_env or DEFAULT_KEY_ENV[spec.provider]
    if spec.base_url and spec.api_key_env is None and not os.environ.get(env):
        # Local OpenAI-compatible servers (llama.cpp, vLLM, scripted) take any key.
        os.environ.setdefault(env, "local-no-key")
    return make_provider(
        spec.provider,
        spec.model,
        base_url=spec.base_url,
        api_key_env=env,
        timeout_s=spec.timeout_s,
        max_concurrency=spec.max_concurrency,
        retry=retry,
        limiter=limiter,
        cache_prompt=resolve_cache_prompt(spec.cache_prompt),
    )
