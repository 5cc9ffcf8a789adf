"""A run's sandbox from its RunRequested to its end: opened (slots under `max_live`),
settled when the run ends, given up when its events fail on every delivery."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from assay.bus import Delivery
from assay_schemas import (
    AgentFinished,
    ArtifactsSealed,
    AssayError,
    ErrorInfo,
    Event,
    FailureStage,
    RunFailed,
    RunHistory,
    RunRequested,
    SandboxReady,
    SandboxSpec,
    same_run,
)

from ..backends import SandboxExists
from ..bundles import ensure_bundle
from ..extension import extension_hash
from ..failover import seal_declared_lost
from ..runtime import recipe_hash
from .sealing import Sealing

__all__ = ["Lifecycle", "SandboxGivenUp", "runtime_digest"]

log = logging.getLogger("assay.sandbox_manager")

E = TypeVar("E", bound=Event)


class SandboxGivenUp(AssayError):
    """The sandbox-manager stopped retrying a run's sandbox or its seal (dead-lettered)."""


class Lifecycle(Sealing):
    """Opens a run's sandbox on its RunRequested, settles it on its end."""

    # --- events -------------------------------------------------------------------------

    async def on_run_requested(self, event: RunRequested, delivery: Delivery) -> None:
        """Create the run's sandbox, copy the attachments in, announce SandboxReady."""
        assert event.run_id is not None
        if event.run_id in self._live:
            # Opened here already (a redelivery after SandboxReady's publish, before the
            # ack): opening it again would destroy the one in use as "half-made". One
            # still being opened holds the redelivery in the bus until it is done.
            return
        async with self._slot(event.run_id):
            await self._open(event, delivery)

    async def _open(self, event: RunRequested, delivery: Delivery) -> None:
        assert event.run_id is not None
        events = await self.bus.run_events(
            event.campaign_id, event.run_id, known={delivery.sequence: event}
        )
        history = RunHistory.fold(events)
        if history.stage not in ("unknown", "requested"):
            return  # already done (redelivery, or another instance won)
        backend = self.backend_for(event.sandbox)
        sandbox_id = event.run_id
        labels = {
            "assay.campaign": event.campaign_id,
            "assay.run": event.run_id,
            "assay.task": event.task.task_id,
            "assay.instance": self.instance,
        }
        try:
            if event.sandbox.bundle_sha256 is not None:
                await self._blocking(ensure_bundle, self.store, event.sandbox.bundle_sha256)
            try:
                await self._blocking(backend.create, event.sandbox, sandbox_id, labels)
            except SandboxExists:  # half-made before a crash: start it over
                await self._blocking(backend.destroy, sandbox_id)
                await self._blocking(backend.create, event.sandbox, sandbox_id, labels)
            self._owned[sandbox_id] = backend.name
            for ref in event.task.attachments:
                data = await self._blocking(self.store.get_bytes, ref.sha256)
                await self._blocking(backend.write_file, sandbox_id, ref.path, data)
        except Exception as e:
            log.exception("sandbox for run %s failed", event.run_id)
            await self._destroy(sandbox_id)
            await self.bus.publish(
                RunFailed(
                    event_id=RunFailed.id_for(event.run_id, "sandbox"),
                    **same_run(event),
                    stage="sandbox",
                    error=ErrorInfo.of(e).text,
                    error_info=ErrorInfo.of(e),
                    infrastructure=True,
                    producer=self.bus.producer,
                )
            )
            return
        ready = SandboxReady(
            event_id=SandboxReady.id_for(event.run_id),
            **same_run(event),
            sandbox_id=sandbox_id,
            backend=backend.name,
            instance=self.instance,
            image_digest=runtime_digest(backend.name, event.sandbox),
            workspace=list(event.task.attachments),
            producer=self.bus.producer,
        )
        await self.bus.publish(ready)
        self._live[event.run_id] = (event, ready)

    async def on_run_ended(self, event: Event, delivery: Delivery) -> None:
        """Seal what the run left (AgentFinished or RunFailed), then destroy its sandbox."""
        assert isinstance(event, AgentFinished | RunFailed) and event.run_id is not None

        campaign, run = event.campaign_id, event.run_id
        if (known := self._live.get(run)) is not None:
            return await self._settle(*known, event)

        # What sealing needs of the run's history, not its steps: one lookup each.
        def first(kind: type[E]) -> Awaitable[E | None]:
            subject = self.bus.subjects.event(kind.__name__, campaign, run)
            return self.bus.first_event(subject, kind)

        request, ready, seal, failures = await asyncio.gather(
            first(RunRequested),
            first(SandboxReady),
            first(ArtifactsSealed),
            self.bus.run_events(campaign, run, types=(RunFailed,)),
        )
        lost = seal_declared_lost(failures)
        if ready is None or ready.instance != self.instance:
            if self.seal_watch is not None and seal is None and not lost:
                self.seal_watch.watch(ready, event)  # in case the owner is gone for good
            return  # not ours (or never created): the owner seals it
        if seal is not None or lost:
            await self._destroy(ready.sandbox_id)
            return
        assert request is not None, f"run {event.run_id} has SandboxReady but no RunRequested"
        await self._settle(request, ready, event)

    async def on_given_up(self, event: Event, delivery: Delivery, reason: str) -> None:
        """A run's RunRequested, or its end, failed on every delivery: the run gets a
        RunFailed (sandbox, or seal) unless it already ended that way, and its sandbox on
        this instance is destroyed, so that nothing is left running for a run nobody
        drives any more."""
        assert event.run_id is not None
        history = RunHistory.fold(await self.bus.run_events(event.campaign_id, event.run_id))
        request = history.request
        opening = isinstance(event, RunRequested)
        stage: FailureStage = "sandbox" if opening else "seal"
        what = "RunRequested" if opening else f"end ({event.event_type})"
        # Opening: a run with a SandboxReady is the runner's to end. Sealing: a run with a
        # seal is settled; one that failed already keeps that failure.
        sealed = history.seal is not None or isinstance(history.ended, RunFailed)
        done = history.sandbox is not None if opening else sealed
        if request is not None and not done and (not opening or history.ended is None):
            error = SandboxGivenUp(
                f"gave up on the {stage} of run {event.run_id} after {delivery.attempt} "
                f"deliveries of its {what}; the last failed with {reason}"
            )
            await self.bus.publish(
                RunFailed(
                    event_id=RunFailed.id_for(event.run_id, stage),
                    **same_run(request, cause=event),
                    stage=stage,
                    error=ErrorInfo.of(error).text,
                    error_info=ErrorInfo.of(error),
                    infrastructure=True,
                    producer=self.bus.producer,
                )
            )
        if opening and history.sandbox is not None:
            return  # ready: the runner drives it, and its end destroys the sandbox
        self._live.pop(event.run_id, None)
        await self._destroy(event.run_id)  # a sandbox's id is its run's


def runtime_digest(backend: str, spec: SandboxSpec) -> str:
    """Which runtime the sandbox runs: the rootfs recipe hash (both backends import it),
    and its extension's hash where the run has one."""
    extension = f"+ext-{extension_hash(spec.packages)}" if spec.packages else ""
    return f"{backend}:rootfs-{recipe_hash()}{extension}"
