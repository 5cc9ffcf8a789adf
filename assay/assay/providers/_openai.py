"""`OpenAIProvider`: chat completions with tools through `openai.AsyncOpenAI`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import openai
from openai.types.chat import ChatCompletion

from ._base import SdkErrors, SdkProvider
from ._models import Completion, GenerationParams, Message, ToolDefinition
from ._openai_wire import completion_from_openai, to_openai_messages, to_openai_tools

__all__ = ["OpenAIProvider"]


class OpenAIProvider(SdkProvider):
    """Any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp, scripted)."""

    kind_name = "openai"
    sdk_errors = SdkErrors.of(openai)
    sdk_client = openai.AsyncOpenAI

    def __init__(
        self,
        *,
        max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
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
        # `chat.completions.create` walks the whole body against the SDK's TypedDicts on
        # every call (~5 ms at ten steps of history, growing with it) only to hand back the
        # same plain JSON we built; the client's public `post` sends it as it is, with the
        # same auth, timeout, error mapping and response type.
        body = {k: v for k, v in request.items() if k != "extra_body"}
        options: dict[str, Any] = {"security": {"bearer_auth": True}}
        if "extra_body" in request:
            options["extra_json"] = request["extra_body"]
        return await self._client.post(
            "/chat/completions", body=body, options=options, cast_to=ChatCompletion
        )

    def _normalize(self, raw: Any) -> Completion:
        return completion_from_openai(raw, provider=self.kind_name, model=self.model)
