"""Judge work that can burn CPU, in a process of its own that is killed at its deadline.

A thread cannot be stopped and, running Python, holds the GIL that every other service of
a one-process stack (`assay up`) needs; a process can be killed. Each call runs in a
process forked from a forkserver (a few milliseconds), so nothing the agent wrote shares
the service's interpreter. A call may report steps (`steps=True`: the function gets
`on_step`); each step restarts the clock and is named when time runs out. `close` kills
every process at once, so a stuck call never holds up shutdown; a process whose service
was killed outright notices that its forkserver is gone and exits.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from assay_schemas import AssayError

__all__ = ["Closed", "Died", "Killable", "OverTime", "Raised"]

START_S = 30.0
"""Extra time a process has to start (the first start launches the forkserver)."""
_POLL_S = 0.1
"""How often a waiting thread looks at the clock and at `close`."""
_PRELOAD = ["assay_judge.rules.checks", "assay.sealed.tables"]
"""Imported once by the forkserver, so that rule and table workers start ready."""


class OverTime(AssayError):
    """The call (at `step`) ran past its time."""

    def __init__(self, step: str, seconds: float) -> None:
        super().__init__(f"{step!r} ran past {seconds:g} s")
        self.step = step
        self.seconds = seconds


class Died(AssayError):
    """The process ended without an answer (at `step`)."""

    def __init__(self, step: str, exitcode: int | None) -> None:
        super().__init__(f"{step!r} ended its process (exit code {exitcode})")
        self.step = step


class Closed(AssayError):
    """The service is stopping: the call was abandoned."""


class Raised(AssayError):
    """The function raised `error` (kept apart from the machinery's own failures)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


def _orphan_watch(parent: int) -> None:
    # The process is the forkserver's child: if the service is killed (SIGKILL gives it
    # no chance to kill us), the forkserver exits and this process must not live on.
    while os.getppid() == parent:
        time.sleep(_POLL_S * 5)
    os._exit(70)


def _child(
    conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    threading.Thread(target=_orphan_watch, args=(os.getppid(),), daemon=True).start()
    conn.send(("step", "(running)"))  # started: the clock of the call itself begins
    try:
        result = fn(*args, **kwargs)
    except Exception as e:
        try:
            conn.send(("raised", e))
        except Exception:  # an exception that does not pickle: its text will do
            conn.send(("raised", RuntimeError(f"{type(e).__name__}: {e}")))
    else:
        conn.send(("done", result))
    finally:
        conn.close()


class _Steps:
    """`on_step` of a child: sends each step's name to the parent (picklable)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def __call__(self, name: str) -> None:
        self.conn.send(("step", name))


def _with_steps(
    conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    _child(conn, fn, args, {**kwargs, "on_check": _Steps(conn)})


def _context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)  # only takes effect before the server starts
    return ctx


@dataclass
class Killable:
    """Runs calls in processes of their own, each killed at its deadline or on `close`."""

    _live: set[BaseProcess] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: threading.Event = field(default_factory=threading.Event)

    async def call(
        self,
        fn: Callable[..., Any],
        kwargs: dict[str, Any],
        *,
        seconds: float,
        steps: bool = False,
    ) -> Any:
        """`fn(**kwargs)` in a process; with `steps`, `fn` also gets `on_check` and each
        step has `seconds`. Raises Raised (what `fn` raised), OverTime, Died or Closed."""
        return await asyncio.to_thread(self._run, fn, (), kwargs, seconds, steps)

    def close(self) -> None:
        """Kill every running process and refuse new calls."""
        self._closed.set()
        with self._lock:
            live = list(self._live)
        for proc in live:
            proc.kill()

    def _run(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        seconds: float,
        steps: bool,
    ) -> Any:
        if self._closed.is_set():
            raise Closed("the service is stopping")
        ctx = _context()
        receive, send = ctx.Pipe(duplex=False)
        target = _with_steps if steps else _child
        proc = ctx.Process(target=target, args=(send, fn, args, kwargs), daemon=True)
        try:
            proc.start()  # a call whose arguments do not pickle fails here
        except BaseException:
            receive.close()
            send.close()
            raise
        with self._lock:
            self._live.add(proc)
        try:
            send.close()
            return self._wait(proc, receive, seconds)
        finally:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=5)
            receive.close()
            with self._lock:
                self._live.discard(proc)

    def _wait(self, proc: BaseProcess, receive: Connection, seconds: float) -> Any:
        step = "(start)"
        deadline = time.monotonic() + seconds + START_S
        while True:
            if self._closed.is_set():
                raise Closed("the service is stopping")
            left = deadline - time.monotonic()
            if left <= 0:
                raise OverTime(step, seconds)
            if not receive.poll(min(left, _POLL_S)):
                continue
            try:
                kind, value = receive.recv()
            except (EOFError, OSError):
                proc.join(timeout=1)
                raise Died(step, proc.exitcode) from None
            if kind == "step":
                step, deadline = value, time.monotonic() + seconds
            elif kind == "done":
                return value
            else:
                raise Raised(value)
