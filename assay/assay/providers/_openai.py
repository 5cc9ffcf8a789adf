"""`OpenAIProvider`: chat completions with tools through `openai.AsyncOpenAI`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import httpx2
import openai
from pydantic_core import to_json

from ._base import SdkErrors, SdkProvider
from ._models import Completion, GenerationParams, Message, ToolDefinition
from ._openai_wire import completion_from_openai_json, to_openai_messages, to_openai_tools

__all__ = ["OpenAIProvider"]


class OpenAIProvider(SdkProvider):
    """Any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp, scripted)."""

    kind_name = "openai"
    sdk_errors = SdkErrors.of(openai)
    sdk_client = openai.AsyncOpenAI
    sdk_http_client = openai.DefaultAioHttpClient

    def __init__(
        self,
        *,
        max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._max_tokens_field = max_tokens_field
        """Newer OpenAI models reject `max_tokens`; some compatible servers want it."""
        self._tools: tuple[Sequence[ToolDefinition], list[dict[str, Any]]] | None = None
        """The last tool list and its wire form: a run offers the same list every turn."""

    def _wire_tools(self, tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
        # By identity: the cache holds the list, so its id cannot be reused by another.
        if self._tools is None or self._tools[0] is not tools:
            self._tools = (tools, to_openai_tools(tools))
        return self._tools[1]

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
            request["tools"] = self._wire_tools(tools)
            request["tool_choice"] = params.tool_choice
        if params.temperature is not None:
            request["temperature"] = params.temperature
        if params.top_p is not None:
            request["top_p"] = params.top_p
        if params.stop:
            request["stop"] = list(params.stop)
        if params.seed is not None:
            request["seed"] = params.seed
        if self.cache_prompt and params.cache_key is not None:
            request["prompt_cache_key"] = params.cache_key
        if params.extra_body:
            request["extra_body"] = dict(params.extra_body)
        return request

    async def _send(self, request: dict[str, Any]) -> Any:
        # `chat.completions.create` walks the whole body against the SDK's TypedDicts on
        # every call (~5 ms at ten steps of history, growing with it) only to hand back the
        # same plain JSON we built, and builds its response models field by field; the
        # client's public `post` sends our bytes as they are (same auth, timeout, error
        # mapping: a non-2xx answer still raises the SDK's errors) and hands back the raw
        # response, read lean by `completion_from_openai_json`. `extra_body` is merged over
        # the body as the SDK merges `extra_json` (shallowly, its keys winning).
        body = {k: v for k, v in request.items() if k != "extra_body"}
        body.update(request.get("extra_body") or {})
        data = to_json(body)  # the JSON json.dumps makes (compact, UTF-8), ~3x faster
        return await self._client.post(
            "/chat/completions",
            content=data,
            options={"security": {"bearer_auth": True}},
            cast_to=httpx2.Response,
        )

    def _normalize(self, raw: Any) -> Completion:
        return completion_from_openai_json(raw.content, provider=self.kind_name, model=self.model)
