"""Seals owed by a sandbox-manager that is gone for good.

A run's sandbox lives on the instance that opened it, and only that instance can seal it
(the files are on its disk). An instance that restarts seals what it owes (`reconcile`);
one that never comes back would leave every run that ended in its sandboxes unsealed,
judged by no one, forever. Every instance sees every end of run, so the others watch the
ends they do not own until the seal appears; when the owner stays unreachable for
`grace_s`, the run is declared what it is, an infrastructure failure at the seal
(`RunFailed`, stage "seal"), which `assay retry` takes to a new attempt. Its event id is
fixed by the run, so watchers that declare it together log it once; it is logged only if
no seal was logged since the watcher read, and the owner's seal only if no failure was
(`SandboxService._settle`): an owner that was only cut off and comes back as the grace
ends cannot seal a run declared lost, nor can a run it sealed be declared lost.

The owner answers a liveness request on its own subject (`ALIVE`); "no responders" from
NATS means no process of that instance is connected. The watch is kept in the instance's
state folder at every sweep that changed it and at stop, and read back at start: a watcher
that restarts still watches what it watched (a crash loses at most one interval's new runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from assay.bus import Bus, Unchanged
from assay.contract import rpc_subject
from assay_schemas import (
    ArtifactsSealed,
    BusError,
    ErrorInfo,
    Event,
    LogChanged,
    RunFailed,
    RunHistory,
    SandboxReady,
    parse_event,
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
    path: Path | None = None
    """Where the watch is kept across restarts; None: in memory only."""
    _owed: dict[str, _Owed] = field(default_factory=dict)
    _changed: bool = False
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
        if ended.run_id not in self._owed:
            self._owed[ended.run_id] = _Owed(ended.campaign_id, ready.instance, ended)
            self._changed = True

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
            down = self._down_since.get(owed.owner)
            down_s = now - down if down is not None else 0.0
            due = down is not None and down_s >= self.grace_s
            # A declaration's condition is read before the history it is decided on; an
            # owner still within its grace cannot be declared, so its runs need no read.
            sealed = self.bus.subjects.event(ArtifactsSealed.__name__, owed.campaign_id, run_id)
            seen = await self.bus.last_sequence(sealed) if due else 0
            history = RunHistory.fold(
                await self.bus.run_events(owed.campaign_id, run_id, types=_SETTLES)
            )
            if history.seal is not None or seal_declared_lost(history.failures):
                del self._owed[run_id]
                self._changed = True
                continue
            if due:
                try:
                    await self._declare_lost(owed, down_s, Unchanged(sealed, seen))
                except LogChanged:
                    continue  # the owner sealed it meanwhile: the next sweep reads the seal
                del self._owed[run_id]
                self._changed = True
                lost.append(run_id)
        self.save()
        return lost

    def save(self) -> None:
        """Keep the watch in `path` if it changed since last kept (written whole, then
        renamed in: a crash mid-write leaves the previous copy)."""
        if self.path is None or not self._changed:
            return
        owed = [
            {
                "campaign_id": o.campaign_id,
                "owner": o.owner,
                "ended": o.ended.model_dump(mode="json"),
            }
            for o in self._owed.values()
        ]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        staging.write_text(json.dumps(owed))
        staging.replace(self.path)
        self._changed = False

    def load(self) -> None:
        """Watch again what `path` kept. An entry that does not read is dropped with a
        warning (the file is this instance's own; a damaged one must not stop the service)."""
        if self.path is None or not self.path.is_file():
            return
        try:
            entries = json.loads(self.path.read_text())
            if not isinstance(entries, list):
                raise ValueError("not a list")
        except (OSError, ValueError) as e:
            log.warning("seal watch: %s does not read (%s); starting empty", self.path, e)
            return
        for entry in entries:
            try:
                ended = parse_event(entry["ended"])
                if ended.run_id is None:
                    raise ValueError("an end of run without a run")
                owed = _Owed(str(entry["campaign_id"]), str(entry["owner"]), ended)
            except Exception as e:  # any damage: that entry only
                log.warning("seal watch: an entry of %s does not read: %s", self.path, e)
                continue
            self._owed.setdefault(ended.run_id, owed)

    async def _declare_lost(self, owed: _Owed, down_s: float, unchanged: Unchanged) -> None:
        """Log the run's seal as lost, on condition that no seal was logged since read."""
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
            ),
            unchanged=unchanged,
        )

    def start(self) -> None:
        """Watch what was kept, then sweep every interval_s on the running loop until `stop`."""
        self.load()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop sweeping; keep the watch."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.save()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.sweep()
            except Exception:  # a bus outage: the next sweep tries again
                log.warning("seal watch sweep failed", exc_info=True)
