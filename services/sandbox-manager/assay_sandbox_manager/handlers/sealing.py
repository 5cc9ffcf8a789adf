"""Sealing: a run's end → its files copied, stored and announced (ArtifactsSealed), its
sandbox destroyed; unless a survivor declared the seal lost."""

from __future__ import annotations

from assay.bus import Unchanged
from assay_schemas import (
    AgentFinished,
    ArtifactsSealed,
    BusError,
    Event,
    Exclusion,
    LogChanged,
    RunFailed,
    RunRequested,
    SandboxReady,
    same_run,
)

from ..backends import SandboxNotFound
from ..failover import seal_declared_lost
from ..seal import Seal, SealCaps, answer_fields, seal_fields, store_copy
from .sandboxes import Sandboxes

__all__ = ["Sealing"]

_SETTLE_READS = 3
"""Reads of a run's failures before its seal gives up for this delivery: each refused seal
means a failure was logged meanwhile, which a read then sees; only a flood of them on one
run would use all three."""


class Sealing(Sandboxes):
    """Seals the runs whose sandbox this instance holds."""

    async def _settle(self, request: RunRequested, ready: SandboxReady, ended: Event) -> None:
        """Seal the run unless another instance declared its seal lost while this one was
        out of reach; then destroy its sandbox.

        The declaration may be logged after the run's end, even after this instance read
        the log: the seal is published on condition that nothing was logged on the run's
        RunFailed subject since it was read, and the survivor's declaration on condition
        that no seal was, so the log holds one or the other, never both.
        """
        campaign, run = ended.campaign_id, ended.run_id or ""
        failed = self.bus.subjects.event(RunFailed.__name__, campaign, run)
        for _ in range(_SETTLE_READS):
            seen = await self.bus.last_sequence(failed)
            # An empty subject has nothing to read: a failure logged since this lookup
            # fails the seal's condition, and the next turn reads it.
            failures = await self.bus.run_events(campaign, run, types=(RunFailed,)) if seen else []
            if seal_declared_lost(failures):
                self._live.pop(run, None)
                return await self._destroy(ready.sandbox_id)
            try:
                return await self.seal(request, ready, ended, unchanged=Unchanged(failed, seen))
            except LogChanged:
                continue  # a failure was logged meanwhile: read it, decide again
        raise BusError(
            f"run {ended.run_id}: its RunFailed subject changed on each of {_SETTLE_READS} "
            "reads; not sealed this time"
        )

    async def seal(
        self,
        request: RunRequested,
        ready: SandboxReady,
        ended: Event,
        *,
        unchanged: Unchanged | None = None,
    ) -> None:
        """Copy, store and announce the run's files; then destroy the sandbox.
        `unchanged`: the announcement's condition (see `_settle`); LogChanged when it
        fails, with the sandbox left as it was."""
        backend = self.backend_for(request.sandbox)
        await self._quiesce(ready.sandbox_id)  # the files as the last command left them
        try:
            caps = SealCaps.of(request.sandbox)
            copy = await self._blocking(backend.copy_for_seal, ready.sandbox_id, caps)
        except SandboxNotFound:
            seal = Seal([], [_lost()])
        else:
            seal = await self._blocking(store_copy, copy, self.store)
        fields = await self._blocking(seal_fields, seal, self.store)
        answer = await self._blocking(answer_fields, ended, self.store)
        await self.bus.publish(
            ArtifactsSealed(
                event_id=ArtifactsSealed.id_for(request.run_id),
                **same_run(request, cause=ended),
                **fields,
                **answer,
                agent_id=request.agent.agent_id,
                epoch=request.epoch,
                sandbox_id=ready.sandbox_id,
                outcome="finished" if isinstance(ended, AgentFinished) else "failed",
                producer=self.bus.producer,
            ),
            unchanged=unchanged,
        )
        self._live.pop(request.run_id or "", None)
        await self._destroy(ready.sandbox_id)


def _lost() -> Exclusion:
    return Exclusion(
        path="/workspace", reason="sandbox lost before sealing (nothing could be read)"
    )
