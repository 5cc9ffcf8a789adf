"""What the runner's roles share: the bus, the store, and each campaign's control
declarations (the door plans a task's controls from them, the driver plays them)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from assay.bus import Bus
from assay.security.controls import ControlsKey, SealBroken
from assay.store import BlobStore
from assay_schemas import ControlDeclared, ControlDetails, RunRequested

__all__ = ["RunnerBase"]

log = logging.getLogger("assay.runner")


@dataclass(kw_only=True)
class RunnerBase:
    """The state every role of `RunnerService` reads."""

    bus: Bus
    store: BlobStore
    controls: ControlsKey | None = None
    """Opens the sealed control declarations (this deployment's controls secret); None:
    no declaration opens, so no control is requested or played."""
    _controls: dict[str, list[ControlDetails]] = field(default_factory=dict)
    """Each campaign's control declarations, read once: the submitter declares them all
    before its first task, so the first admission already finds every one."""

    async def _controls_of(self, campaign_id: str) -> list[ControlDetails]:
        """The campaign's control declarations, opened (read from the log once)."""
        if campaign_id not in self._controls:
            subject = self.bus.subjects.event("ControlDeclared", campaign_id, "-")
            self._controls[campaign_id] = [
                opened
                async for logged in self.bus.replay(subject=subject)
                if isinstance(logged.event, ControlDeclared)
                and (opened := self._open(logged.event)) is not None
            ]
        return self._controls[campaign_id]

    def _open(self, declared: ControlDeclared) -> ControlDetails | None:
        """A declaration's details; None (logged) when it does not open here: a forged or
        foreign declaration requests nothing and stops nothing."""
        if self.controls is None:
            log.warning("no controls key: %s requests no control", declared.event_id)
            return None
        try:
            return self.controls.open(declared)
        except SealBroken as e:
            log.warning("%s", e)
            return None

    async def _control_of(self, request: RunRequested) -> ControlDetails | None:
        """The declaration of the control a run request is an attempt of, if any: its
        task, agent and epoch (`assay retry` makes later attempts under new run ids)."""
        for d in await self._controls_of(request.campaign_id):
            if (d.task_id, d.agent_id, d.epoch) == (
                request.task_id,
                request.agent.agent_id,
                request.epoch,
            ):
                return d
        return None
