"""The base of a model client wrapped around another: each wrapper states what it changes.

```python
@dataclass(kw_only=True)
class Counted(ProviderWrapper):
    turns: int = 0

    async def complete(self, messages, tools=(), params=None) -> Completion:
        self.turns += 1
        return await self.inner.complete(messages, tools, params)
```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._models import Completion, GenerationParams, Message, ToolDefinition
from ._protocol import ModelProvider

__all__ = ["ProviderWrapper"]


@dataclass(kw_only=True)
class ProviderWrapper:
    """A :class:`ModelProvider` that is `inner` unless a subclass says otherwise: the same
    API family and model, the same answers, and nothing to close (whoever made `inner`
    closes it: a runner's clients outlive each run that wraps them)."""

    inner: ModelProvider

    @property
    def kind(self) -> str:
        """The wrapped client's API family."""
        return self.inner.kind

    @property
    def model(self) -> str:
        """The wrapped client's model name."""
        return self.inner.model

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        """The wrapped client's answer."""
        return await self.inner.complete(messages, tools, params)

    async def aclose(self) -> None:
        """Nothing: `inner` is its maker's to close."""
