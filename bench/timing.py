"""Timed stand-ins: a provider and a sandbox backend that record how long each call took."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

from assay.providers import (
    Completion,
    Message,
    ModelProvider,
    UserMessage,
)

__all__ = ["TimedProvider", "timed_backend"]

_TASK = re.compile(r"Task id: (\S+)")


class TimedProvider:
    """A provider that records how long each `complete` took, by the task it is about."""

    def __init__(self, inner: ModelProvider, calls: dict[str, list[float]]) -> None:
        self._inner = inner
        self.calls = calls

    @property
    def kind(self) -> str:
        return self._inner.kind

    @property
    def model(self) -> str:
        return self._inner.model

    async def complete(self, messages: Sequence[Message], *args: Any, **kwargs: Any) -> Completion:
        """The inner provider's `complete`; tools and params pass through unread."""
        first = next((m for m in messages if isinstance(m, UserMessage)), None)
        found = _TASK.search(first.text) if first is not None else None
        t0 = time.perf_counter()
        try:
            return await self._inner.complete(messages, *args, **kwargs)
        finally:
            key = found.group(1) if found else "?"
            self.calls.setdefault(key, []).append((time.perf_counter() - t0) * 1000)

    async def aclose(self) -> None:
        await self._inner.aclose()


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
