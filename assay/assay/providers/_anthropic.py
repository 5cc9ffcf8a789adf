"""`AnthropicProvider`: the messages API with tools through `anthropic.AsyncAnthropic`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anthropic

from ._anthropic_wire import completion_from_anthropic, to_anthropic_prompt, to_anthropic_tools
from ._base import SdkErrors, SdkProvider
from ._models import Completion, GenerationParams, Message, ToolDefinition
from ._prompt_cache import mark_anthropic_breakpoints, stable_block

__all__ = ["AnthropicProvider"]

_TOOL_CHOICE = {"auto": "auto", "required": "any", "none": "none"}


class AnthropicProvider(SdkProvider):
    """Any Anthropic messages-API endpoint (Anthropic, compatible gateways, scripted)."""

    kind_name = "anthropic"
    sdk_errors = SdkErrors.of(anthropic)
    sdk_client = anthropic.AsyncAnthropic
    sdk_http_client = anthropic.DefaultAioHttpClient

    def _build(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        params: GenerationParams,
    ) -> dict[str, Any]:
        prompt = to_anthropic_prompt(messages)
        wire_tools = to_anthropic_tools(tools)
        system: str | list[dict[str, Any]] | None = prompt.system
        if self.cache_prompt:
            stable = None
            if params.stable_messages:
                opening = to_anthropic_prompt(messages[: params.stable_messages])
                stable = stable_block(opening.messages)
            system = mark_anthropic_breakpoints(
                wire_tools, prompt.system, prompt.messages, model=self.model, stable=stable
            )
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params.max_tokens,
            "messages": prompt.messages,
        }
        if system is not None:
            request["system"] = system
        if tools:
            request["tools"] = wire_tools
            request["tool_choice"] = {"type": _TOOL_CHOICE[params.tool_choice]}
        if params.stop:
            request["stop_sequences"] = list(params.stop)
        # This SDK version has no sampling keywords; the API still takes them in the body.
        extra: dict[str, Any] = dict(params.extra_body)
        if params.temperature is not None:
            extra.setdefault("temperature", params.temperature)
        if params.top_p is not None:
            extra.setdefault("top_p", params.top_p)
        if extra:
            request["extra_body"] = extra
        return request

    async def _send(self, request: dict[str, Any]) -> Any:
        return await self._client.messages.create(**request)

    def _normalize(self, raw: Any) -> Completion:
        return completion_from_anthropic(raw, provider=self.kind_name, model=self.model)
