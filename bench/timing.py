"""Timed stand-ins: a provider and a sandbox backend that record how long each call took."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assay.providers import (
    Completion,
    GenerationParams,
    Message,
    ProviderWrapper,
    ToolDefinition,
    UserMessage,
)

__all__ = ["TimedProvider", "timed_backend"]

_TASK = re.compile(r"Task id: (\S+)")


@dataclass(kw_only=True)
class TimedProvider(ProviderWrapper):
    """A provider that records how long each `complete` took, by the task it is about."""

    calls: dict[str, list[float]]

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        """The inner provider's `complete`; tools and params pass through unread."""
        first = next((m for m in messages if isinstance(m, UserMessage)), None)
        found = _TASK.search(first.text) if first is not None else None
        t0 = time.perf_counter()
        try:
            return await self.inner.complete(messages, tools, params)
        finally:
            key = found.group(1) if found else "?"
            self.calls.setdefault(key, []).append((time.perf_counter() - t0) * 1000)

    async def aclose(self) -> None:
        """Close the inner provider: the bench made it for this one wrapper."""
        await self.inner.aclose()


def timed_backend(backend: Any, execs: dict[str, list[float]]) -> Any:
    """Record the duration of every command the backend runs, per sandbox."""
    inner = backend.exec

    def exec_(sandbox_id: str, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(sandbox_id, *args, **kwargs)
        finally:
            execs[sandbox_id].append((time.perf_counter() - t0) * 1000)

    backend.exec = exec_
    return backend
