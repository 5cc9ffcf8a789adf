"""What nobody else ends: sandboxes left by a previous life (reconciled on start), and
runs that hold one past their wall-clock limit (ended as overdue)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from assay_schemas import AssayError, ErrorInfo, RunFailed, RunHistory, same_run

from ..backends import SandboxBackend
from ..failover import seal_declared_lost
from .sealing import Sealing

__all__ = ["OVERDUE_CHECK_S", "OVERDUE_GRACE_S", "Reaper", "RunOverdue"]

log = logging.getLogger("assay.sandbox_manager")


class RunOverdue(AssayError):
    """A run held a sandbox past its wall-clock limit (and a grace) without ending."""


OVERDUE_GRACE_S = 300.0
"""Past a run's `wall_clock_s`, how long its sandbox waits for the run to end before the
sandbox-manager ends it: the runner checks the limit only between steps, and a step may
still be in a model call and a command (each bounded by its own timeout)."""
OVERDUE_CHECK_S = 30.0


@dataclass(kw_only=True)
class Reaper(Sealing):
    """Reconciles on start, and ends overdue runs every `overdue_check_s`."""

    overdue_grace_s: float = OVERDUE_GRACE_S
    overdue_check_s: float = OVERDUE_CHECK_S
    _overdue_watch: asyncio.Task[None] | None = None

    async def end_overdue(self) -> list[str]:
        """End every run holding a sandbox here past its wall-clock limit plus the grace
        with no end logged (its runner gone for good, or stuck): RunFailed, after which
        its end seals and destroys the sandbox as any run's. The run ids ended.

        A run's clock starts when a drive first claims its sandbox: one made ahead waits
        its turn in the warm pool, and that wait is the queue's, not the run's. While no
        drive has claimed it, it is overdue only once no drive has been seen here for as
        long (the runners are gone, not busy with the runs ahead of it)."""
        now = datetime.now(UTC)
        ended = []
        for run_id, (request, ready) in list(self._live.items()):
            allowed = request.limits.wall_clock_s + self.overdue_grace_s
            began = self._drive_began.get(ready.sandbox_id)
            since = began or max(ready.occurred_at, self._drive_seen or ready.occurred_at)
            held = (now - since).total_seconds()
            if held < allowed:
                continue
            history = RunHistory.fold(await self.bus.run_events(ready.campaign_id, run_id))
            if history.ended is not None:
                continue  # its end is on its way to the seal
            what = (
                f"held its sandbox {held:.0f} s,"
                if began is not None
                else f"waited {held:.0f} s for a runner (none seen here meanwhile),"
            )
            error = RunOverdue(
                f"run {run_id} {what} past its wall-clock limit "
                f"({request.limits.wall_clock_s:g} s) and {self.overdue_grace_s:g} s more, "
                "with no end logged"
            )
            await self.bus.publish(
                RunFailed(
                    event_id=RunFailed.id_for(run_id, "agent"),
                    **same_run(request, cause=ready),
                    stage="agent",
                    error=ErrorInfo.of(error).text,
                    error_info=ErrorInfo.of(error),
                    infrastructure=True,
                    producer=self.bus.producer,
                )
            )
            ended.append(run_id)
        return ended

    async def _watch_overdue(self) -> None:
        while True:
            await asyncio.sleep(self.overdue_check_s)
            try:
                await self.end_overdue()
            except Exception:  # the bus may be down for a while: the next turn tries again
                log.exception("ending overdue runs failed")

    # --- restart ------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, reconcile leftovers from a previous life, then start consuming."""
        await self.bus.connect()
        await self.reconcile()
        await self.bus.start()
        if self.seal_watch is not None:
            self.seal_watch.start()
        self._overdue_watch = asyncio.create_task(self._watch_overdue())

    async def stop(self) -> None:
        """Stop consuming and serving commands; live sandboxes stay for the next life."""
        if self._overdue_watch is not None:
            self._overdue_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._overdue_watch
            self._overdue_watch = None
        if self.seal_watch is not None:
            await self.seal_watch.stop()
        await self.bus.stop()

    async def reconcile(self) -> int:
        """On start: seal sandboxes of finished runs, destroy orphans; keep live runs.

        Returns how many sandboxes were sealed or destroyed.
        """
        changed = 0
        for backend in self.backends.values():
            for info in await self._blocking(backend.list_live):
                if info.labels.get("assay.instance", self.instance) != self.instance:
                    continue
                changed += await self._reconcile_sandbox(backend, info.sandbox_id, info.labels)
        return changed

    async def _reconcile_sandbox(
        self, backend: SandboxBackend, sandbox_id: str, labels: dict[str, str]
    ) -> bool:
        """Seal or destroy one leftover sandbox; keep it if its run is still going."""
        campaign, run = labels.get("assay.campaign"), labels.get("assay.run")
        history = RunHistory.fold(
            await self.bus.run_events(campaign, run) if campaign and run else []
        )
        request, ready, ended = history.request, history.sandbox, history.ended
        if request is not None and ready is not None and ready.sandbox_id == sandbox_id:
            if ended is None:
                self._owned[sandbox_id] = backend.name  # still running: the runner resumes it
                self._live[ready.run_id or ""] = (request, ready)
                return False
            if history.seal is None and not seal_declared_lost(history.failures):
                self._owned[sandbox_id] = backend.name
                await self._settle(request, ready, ended)
                return True
        await self._blocking(backend.destroy, sandbox_id)
        self.destroyed.add(sandbox_id)
        return True
