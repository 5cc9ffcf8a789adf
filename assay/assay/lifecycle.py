"""`Startable`: what runs in the background until stopped, usable as a context manager;
`cancelled_meanwhile`: whether a task at work has been asked to stop, and
`stop_if_cancelled`: its cancellation raised in place of the error it became."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

__all__ = ["Startable", "cancelled_meanwhile", "stop_if_cancelled"]


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


def cancelled_meanwhile() -> bool:
    """Whether the running task has been asked to stop, whatever error reached it instead.

    nats-py turns the cancellation of a task awaiting it into errors of its own: a request
    whose future the closing connection cancelled raises TimeoutError, a draining
    connection refuses a subscription. Code that retries, or records a failure, on an
    error asks this first: else a service being stopped retries its work and gives it up
    as failed (a judge's back-fill did, for the runs in flight at its stop)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def stop_if_cancelled(error: BaseException) -> None:
    """Raise the cancellation `error` stands for, if the running task is being stopped:
    for code that would otherwise retry the work or record it as failed."""
    if cancelled_meanwhile():
        raise asyncio.CancelledError from error
