"""Seals owed by a sandbox-manager that is gone for good.

A run's sandbox lives on the instance that opened it, and only that instance can seal it
(the files are on its disk). An instance that restarts seals what it owes (`reconcile`);
one that never comes back would leave every run that ended in its sandboxes unsealed,
judged by no one, forever. Every instance sees every end of run, so the others watch the
ends they do not own until the seal appears; when the owner stays unreachable for
`grace_s`, the run is declared what it is, an infrastructure failure at the seal
(`RunFailed`, stage "seal"), which `assay retry` takes to a new attempt. Its event id is
fixed by the run, so watchers that declare it together log it once.

The owner answers a liveness request on its own subject (`ALIVE`); "no responders" from
NATS means no process of that instance is connected. The watch lives in memory: a watcher
that restarts forgets it, which leaves a run unsealed only when the owner is also gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from assay.bus import Bus
from assay.contract import rpc_subject
from assay_schemas import (
    ArtifactsSealed,
    BusError,
    ErrorInfo,
    Event,
    RunFailed,
    RunHistory,
    SandboxReady,
    same_run,
)

from .contract import ALIVE

__all__ = ["SealWatch", "seal_declared_lost"]

log = logging.getLogger("assay.sandbox_manager")

_PING_TIMEOUT_S = 2.0
_SETTLES = (RunFailed, ArtifactsSealed)
"""What of a watched run's history says it is settled (sealed, or declared lost)."""


def seal_declared_lost(failures: Iterable[Event]) -> bool:
    """Whether, among a run's RunFailed events, another instance declared its seal lost
    (its owner must not seal it after all: the run counts as an infrastructure failure)."""
    return any(
        isinstance(f, RunFailed) and f.stage == "seal" and f.infrastructure for f in failures
    )


class _Owed(NamedTuple):
    campaign_id: str
    owner: str
    ended: Event


@dataclass
class SealWatch:
    """Runs ended in other instances' sandboxes, watched until sealed or declared lost."""

    bus: Bus
    instance: str
    interval_s: float = 10.0
    grace_s: float = 60.0
    """How long an owner must stay unreachable before its seals are declared lost: longer
    than a NATS node's failover, so a reconnecting owner is not taken for dead."""
    _owed: dict[str, _Owed] = field(default_factory=dict)
    _down_since: dict[str, float] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    @property
    def owed(self) -> int:
        """How many runs are being watched."""
        return len(self._owed)

    def watch(self, ready: SandboxReady | None, ended: Event) -> None:
        """Watch a run (not sealed, not declared lost) that ended in another instance's
        sandbox."""
        if ready is None or ended.run_id is None or ready.instance == self.instance:
            return
        self._owed.setdefault(ended.run_id, _Owed(ended.campaign_id, ready.instance, ended))

    async def alive(self, owner: str) -> bool:
        """Whether some process of instance `owner` answers on the bus now."""
        subject = rpc_subject(self.bus.subjects.prefix, ALIVE, {"instance": owner})
        try:
            await self.bus.request(subject, b"", timeout=_PING_TIMEOUT_S)
        except BusError:
            return False
        return True

    async def sweep(self) -> list[str]:
        """One pass: forget settled runs, declare lost those of owners gone for grace_s.
        Returns the runs declared lost."""
        now = time.monotonic()
        owners = {owed.owner for owed in self._owed.values()}
        for owner in owners:
            if await self.alive(owner):
                self._down_since.pop(owner, None)
            else:
                self._down_since.setdefault(owner, now)
        lost = []
        for run_id, owed in list(self._owed.items()):
            history = RunHistory.fold(
                await self.bus.run_events(owed.campaign_id, run_id, types=_SETTLES)
            )
            if history.seal is not None or seal_declared_lost(history.failures):
                del self._owed[run_id]
                continue
            down = self._down_since.get(owed.owner)
            if down is not None and now - down >= self.grace_s:
                await self._declare_lost(owed, now - down)
                del self._owed[run_id]
                lost.append(run_id)
        return lost

    async def _declare_lost(self, owed: _Owed, down_s: float) -> None:
        assert owed.ended.run_id is not None
        error = (
            f"sandbox-manager {owed.owner} holds this run's sandbox and has not answered for "
            f"{down_s:.0f} s: its files cannot be sealed (declared by {self.instance})"
        )
        info = ErrorInfo(error_class="SandboxManagerGone", message=error)
        log.warning("run %s: %s", owed.ended.run_id, error)
        await self.bus.publish(
            RunFailed(
                event_id=RunFailed.id_for(owed.ended.run_id, "seal"),
                **same_run(owed.ended),
                stage="seal",
                error=info.text,
                error_info=info,
                infrastructure=True,
                producer=self.bus.producer,
            )
        )

    def start(self) -> None:
        """Sweep every interval_s on the running loop until `stop`."""
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop sweeping."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.sweep()
            except Exception:  # a bus outage: the next sweep tries again
                log.warning("seal watch sweep failed", exc_info=True)
