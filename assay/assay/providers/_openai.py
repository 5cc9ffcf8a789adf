"""`OpenAIProvider`: chat completions with tools through `openai.AsyncOpenAI`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import openai

from ._base import SdkErrors, SdkProvider
from ._limiter import AdaptiveLimiter
from ._models import Completion, GenerationParams, Message, ToolDefinition
from ._openai_wire import completion_from_openai, to_openai_messages, to_openai_tools
from ._retry import RetryEvent, RetryPolicy

__all__ = ["OpenAIProvider"]


class OpenAIProvider(SdkProvider):
    """Any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp, scripted)."""

    kind_name = "openai"
    sdk_errors = SdkErrors(
        status=openai.APIStatusError,
        timeout=openai.APITimeoutError,
        connection=openai.APIConnectionError,
        validation=openai.APIResponseValidationError,
    )

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        limiter: AdaptiveLimiter | None = None,
        max_concurrency: int = 8,
        on_retry: Callable[[RetryEvent], None] | None = None,
        max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
    ) -> None:
        # max_retries=0: the retry policy is ours (see _retry.py), not the SDK's.
        self._client = openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )
        super().__init__(
            model=model,
            base_url=str(self._client.base_url),
            retry=retry,
            limiter=limiter,
            max_concurrency=max_concurrency,
            on_retry=on_retry,
        )
        self._max_tokens_field = max_tokens_field
        """Newer OpenAI models reject `max_tokens`; some compatible servers want it."""

    def _build(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        params: GenerationParams,
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(messages),
            self._max_tokens_field: params.max_tokens,
        }
        if tools:
            request["tools"] = to_openai_tools(tools)
            request["tool_choice"] = params.tool_choice
        if params.temperature is not None:
            request["temperature"] = params.temperature
        if params.top_p is not None:
            request["top_p"] = params.top_p
        if params.stop:
            request["stop"] = list(params.stop)
        if params.seed is not None:
            request["seed"] = params.seed
        if params.extra_body:
            request["extra_body"] = dict(params.extra_body)
        return request

    async def _send(self, request: dict[str, Any]) -> Any:
        return await self._client.chat.completions.create(**request)

    def _normalize(self, raw: Any) -> Completion:
        return completion_from_openai(raw, provider=self.kind_name, model=self.model)

    async def aclose(self) -> None:
        """Close the SDK client's connection pool."""
        await self._client.close()
