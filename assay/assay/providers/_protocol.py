"""The role every model provider plays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ._models import Completion, GenerationParams, Message, ToolDefinition

__all__ = ["ModelProvider"]


@runtime_checkable
class ModelProvider(Protocol):
    """Sends a normalized conversation to a model and returns a normalized completion."""

    @property
    def kind(self) -> str:
        """The API family, e.g. "openai" or "anthropic"."""
        ...

    @property
    def model(self) -> str:
        """The model name requests are sent for."""
        ...

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        """One model turn. Raises `ProviderRequestError` or `ProviderUnavailable`."""
        ...

    async def aclose(self) -> None:
        """Release HTTP connections."""
        ...
