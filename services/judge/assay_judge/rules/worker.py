"""Rule checks in a worker process, each check under a time budget.

The checks are linear-time, but "linear" over megabytes of agent text is still CPU: run
in the service's process they would hold the GIL that every other service of a
one-process stack (`assay up`) needs. So each evaluation runs in its own process, forked
from a forkserver that has the checks imported (a few milliseconds a run). The process
names each check as it starts it; one that runs past the budget is killed and the error
names the check. Closing kills every worker at once, so a stuck check never holds up
shutdown (the message is then redelivered, and the budget ends it there too).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from .checks import RuleVerdict

__all__ = ["CheckFailed", "Evaluator", "RuleWorkers", "WorkersClosed"]

Evaluator = Callable[..., RuleVerdict]
"""`evaluate` or a stand-in: keyword arguments plus `on_check`; module-level (the worker
imports it by name)."""

_START_S = 30.0
"""Extra time a worker has to start (the first start launches the forkserver)."""
_POLL_S = 0.1
"""How often a waiting thread looks at the clock and at `close`."""
_PRELOAD = ["assay_judge.rules.checks"]


class CheckFailed(Exception):
    """A check ran past its budget, raised, or ended its worker; the message says which."""


class WorkersClosed(Exception):
    """The service is stopping: the evaluation was abandoned (the message is redelivered)."""


def _child(conn: Connection, evaluator: Evaluator, kwargs: dict[str, Any]) -> None:
    def on_check(name: str) -> None:
        conn.send(("check", name))

    try:
        verdict = evaluator(on_check=on_check, **kwargs)
    except Exception as e:  # reported to the parent, which says which check raised
        conn.send(("error", f"{type(e).__name__}: {e}"))
    else:
        conn.send(("done", verdict))
    finally:
        conn.close()


def _context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)  # only takes effect before the server starts
    return ctx


@dataclass
class RuleWorkers:
    """Runs evaluations in worker processes with a per-check time budget."""

    budget_s: float
    _live: set[BaseProcess] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: threading.Event = field(default_factory=threading.Event)

    async def run(self, evaluator: Evaluator, **kwargs: Any) -> RuleVerdict:
        """`evaluator(**kwargs)` in a worker process (waited on from a thread)."""
        return await asyncio.to_thread(self._run, evaluator, kwargs)

    def close(self) -> None:
        """Kill every running worker and refuse new evaluations."""
        self._closed.set()
        with self._lock:
            live = list(self._live)
        for proc in live:
            proc.kill()

    def _run(self, evaluator: Evaluator, kwargs: dict[str, Any]) -> RuleVerdict:
        if self._closed.is_set():
            raise WorkersClosed("the rule judge is stopping")
        ctx = _context()
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(send, evaluator, kwargs), daemon=True)
        with self._lock:
            self._live.add(proc)
        try:
            proc.start()
            send.close()
            return self._wait(proc, receive)
        finally:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=5)
            receive.close()
            with self._lock:
                self._live.discard(proc)

    def _wait(self, proc: BaseProcess, receive: Connection) -> RuleVerdict:
        check = "(worker start)"
        deadline = time.monotonic() + self.budget_s + _START_S
        while True:
            if self._closed.is_set():
                raise WorkersClosed("the rule judge is stopping")
            left = deadline - time.monotonic()
            if left <= 0:
                raise CheckFailed(f"check {check!r} ran past its {self.budget_s:g} s budget")
            if not receive.poll(min(left, _POLL_S)):
                continue
            try:
                kind, value = receive.recv()
            except (EOFError, OSError):
                proc.join(timeout=1)
                raise CheckFailed(
                    f"check {check!r} ended its worker (exit code {proc.exitcode})"
                ) from None
            if kind == "check":
                check, deadline = value, time.monotonic() + self.budget_s
            elif kind == "done":
                verdict: RuleVerdict = value
                return verdict
            else:
                raise CheckFailed(value)
