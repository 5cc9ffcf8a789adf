"""`Startable`: what runs in the background until stopped, usable as a context manager."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

__all__ = ["Startable"]


class Startable(ABC):
    """`with thing:` starts it and stops it on the way out, whatever happened inside."""

    @abstractmethod
    def start(self) -> Self:
        """Start running; returns self once ready."""

    @abstractmethod
    def stop(self) -> None:
        """Stop running (a no-op when not started)."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
