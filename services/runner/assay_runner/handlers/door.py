"""The runner's door: a submitted task admitted or refused, its runs (and its controls')
requested, the submitter answered; a started campaign's tasks admitted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from opentelemetry import trace
from opentelemetry.context import Context

from assay.bus import Delivery, Refusal, Unchanged, read_campaign, read_raw
from assay.security.signing import TrustList, trust_for
from assay.telemetry import tracer
from assay_schemas import (
    CampaignSpec,
    CampaignStarted,
    InvalidEvent,
    LogChanged,
    RunRequested,
    TaskAccepted,
    TaskRejected,
    TaskSubmitted,
    parse_event,
)

from ..admission import Admission, Stored, answering
from ..scheduler import ControlsUnopened, control_agents, control_runs, interleave, plan_runs
from .base import RunnerBase

__all__ = ["ADMISSIONS_IN_FLIGHT", "Door"]

log = logging.getLogger("assay.runner")

ADMISSIONS_IN_FLIGHT = 16
"""Submissions one runner admits at once. An admission is a few round trips to the log
(the campaign, the task id's earlier run, the answer, each run's request); one at a time,
a busy runner admitted a 300-task campaign over 14 s, so its runs started that late.
Admissions of one task id still go one at a time (`_TaskLocks`)."""


@dataclass
class _Held:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


@dataclass
class _TaskLocks:
    """One lock per (campaign, task id), gone when nobody holds or waits for it: two
    submissions of one task id admitted at once would both find the id free."""

    _held: dict[tuple[str, str], _Held] = field(default_factory=dict)

    @contextlib.asynccontextmanager
    async def hold(self, campaign_id: str, task_id: str) -> AsyncIterator[None]:
        key = (campaign_id, task_id)
        held = self._held.setdefault(key, _Held())
        held.users += 1
        try:
            async with held.lock:
                yield
        finally:
            held.users -= 1
            if not held.users:
                del self._held[key]


@dataclass(kw_only=True)
class Door(RunnerBase):
    """Turns campaigns and tasks into runs."""

    gateway_root: Path | None = None
    """Where program runs' gateway folders are made (a host path sandboxes can traverse)."""

    trust: TrustList | None = None
    """Whose signatures count on submissions; None: this deployment's (`trust_for`)."""

    _scheduling: set[str] = field(default_factory=set)
    """Run ids this process is publishing now: the campaign and the task handler may both
    schedule a task's runs at once, and each run must start one trace, not two."""
    _admitting: _TaskLocks = field(default_factory=_TaskLocks)
    _blob_reads: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Attachments are read whole to be verified: one at a time in this process, so that
    admissions in flight do not hold many of them in memory at once."""

    @property
    def admission(self) -> Admission:
        """The door every submitted task passes."""
        if self.trust is None:
            self.trust = trust_for(self.bus.settings)
        return Admission(
            bus=self.bus, store=self.store, trust=self.trust, blob_reads=self._blob_reads
        )

    # --- scheduling ---------------------------------------------------------------------

    async def _schedule(self, runs: list[RunRequested]) -> RunRequested | None:
        """Request each run not requested yet; another task's request found on one of
        their subjects (its task id taken first, by this runner or another) stops it."""
        task_span = trace.get_current_span().get_span_context()
        for run in runs:
            rid = run.run_id or ""
            if rid in self._scheduling:
                continue  # the other handler of the campaign/task race is on it
            self._scheduling.add(rid)
            try:
                taken = await self._schedule_one(run, task_span)
            finally:
                self._scheduling.discard(rid)
            if taken is not None:
                return taken
        return None

    async def _schedule_one(
        self, run: RunRequested, task_span: trace.SpanContext
    ) -> RunRequested | None:
        of_run = self.bus.subjects.run(run.campaign_id, run.run_id or "")
        if not await self.bus.last_sequence(of_run) and await self._request(run, task_span):
            return None
        # Requested before: a redelivery, the campaign/task race, or another runner that
        # admitted a different task under this id at the same time (which is the one run);
        # or cancelled before, by another runner's pacer that read its campaign's stop.
        try:
            earlier = await self.bus.last_event(self.bus.subjects.of(run))
        except InvalidEvent:
            return None  # no event: the aggregator refuses it, and nothing is compared
        if isinstance(earlier, RunRequested) and earlier.task != run.task:
            return earlier
        return None

    async def _request(self, run: RunRequested, task_span: trace.SpanContext) -> bool:
        """Log the run's request if its subjects are still empty (no request, no
        cancellation); False when another publisher's got there first (stored, or its
        event id seen by JetStream)."""
        if run.sandbox.gateway_dir is not None:
            # Before publishing: the sandbox-manager binds it when it creates the sandbox.
            Path(run.sandbox.gateway_dir).mkdir(mode=0o711, parents=True, exist_ok=True)
        # One trace per run: a new root, linked to the task that caused it.
        links = [trace.Link(task_span)] if task_span.is_valid else []
        with tracer("assay.runner").start_as_current_span(
            f"run {run.run_id}", context=Context(), links=links
        ) as span:
            span.set_attribute("assay.run_id", run.run_id or "")
            span.set_attribute("assay.agent_id", run.agent.agent_id)
            # Stamped when sent, not when planned: a request's time is its place in the
            # task's order (controls planned a moment later must not arrive "later").
            run = run.model_copy(update={"occurred_at": datetime.now(UTC)})
            try:
                of_run = self.bus.subjects.run(run.campaign_id, run.run_id or "")
                published = await self.bus.publish(run, unchanged=Unchanged(of_run, 0))
            except LogChanged:
                return False
            return not published.duplicate

    async def _admit(
        self, campaign: CampaignSpec | None, event: TaskSubmitted, stored: Stored
    ) -> None:
        """Answer a submission: refuse it, or accept it and schedule its runs."""
        async with self._admitting.hold(event.campaign_id, event.task.task_id):
            await self._answer(campaign, event, stored)

    async def _answer(
        self, campaign: CampaignSpec | None, event: TaskSubmitted, stored: Stored
    ) -> None:
        rejected = await self.admission.rejection(event, campaign, stored)
        if rejected is not None or campaign is None:
            if rejected is not None:
                log.info("task %s refused: %s", event.task.task_id, rejected.detail)
                await self.bus.publish(rejected)
            return
        declared = await self._controls_of(event.campaign_id)
        try:
            skip = control_agents(campaign, declared)
        except ControlsUnopened as e:
            log.error("task %s: no run requested: %s", event.task.task_id, e)
            return
        runs = plan_runs(
            campaign,
            event.task,
            producer=self.bus.producer,
            cause=event.event_id,
            gateway_root=self.gateway_root,
            control_agents=skip,
        )
        # The task's controls among its agents' runs, each at its declared slot: requested
        # by this runner like the others, so neither their order nor their producer tells.
        controls = control_runs(
            campaign, event.task, declared, producer=self.bus.producer, cause=event.event_id
        )
        runs = interleave(runs, controls)
        if campaign.stopping is not None:
            # Requested in waves (`Waves`): accepted now, its runs requested when its wave
            # comes (or cancelled, if the campaign stops first).
            await self._accept(event, runs)
            self.pace(campaign)
            return
        # Runs first, the answer after: a submission whose runs another runner requested
        # for a different task under the same id in the meantime is refused, not told yes.
        taken = await self._schedule(runs)
        if taken is not None:
            rejected = self.admission.taken(event, stored.sequence, taken)
            log.info("task %s refused: %s", event.task.task_id, rejected.detail)
            await self.bus.publish(rejected)
            return
        await self._accept(event, runs)

    async def _accept(self, event: TaskSubmitted, runs: list[RunRequested]) -> None:
        await self.bus.publish(
            TaskAccepted(
                event_id=TaskAccepted.id_for(event.event_id),
                **answering(event, self.bus.producer),
                run_ids=[r.run_id or "" for r in runs],
            )
        )

    def pace(self, campaign: CampaignSpec) -> None:
        """Request a wave campaign's tasks as their waves come (`Waves` does; a door
        alone requests none of them)."""

    async def on_task_submitted(self, event: TaskSubmitted, delivery: Delivery) -> None:
        """Admit a task and schedule its runs; a task for no known campaign is refused."""
        d = delivery
        stored = Stored(d.sequence, d.subject, d.data, d.headers)
        await self._admit(await read_campaign(self.bus, event.campaign_id), event, stored)

    async def on_task_refused(self, refusal: Refusal) -> None:
        """Answer a message on a TaskSubmitted subject that is no valid TaskSubmitted; a
        submission the bus refused for its signature is refused by the door, with its why."""
        if isinstance(refusal.event, TaskSubmitted) and self.admission.trust is not None:
            r, event = refusal, refusal.event
            stored = Stored(r.sequence, r.subject, r.data, r.headers)
            await self._admit(await read_campaign(self.bus, event.campaign_id), event, stored)
            return
        await self.admission.answer_invalid(refusal)

    async def on_campaign_started(self, event: CampaignStarted, delivery: Delivery) -> None:
        """Admit the campaign's tasks not refused already (a crash may have cut scheduling)."""
        rejected = self.bus.subjects.event("TaskRejected", event.campaign_id, "-")
        refused = {
            logged.event.submission
            async for logged in self.bus.replay(subject=rejected)
            if isinstance(logged.event, TaskRejected)
        }
        subject = self.bus.subjects.event("TaskSubmitted", event.campaign_id, "-")
        # Raw messages: admission checks each submission's signature over its stored bytes.
        async for raw in read_raw(self.bus.js, self.bus.stream.name, subject=subject):
            try:
                task = parse_event(raw.data, subject=raw.subject)
            except InvalidEvent:  # the live consumer answers what does not parse
                continue
            if isinstance(task, TaskSubmitted) and task.event_id not in refused:
                stored = Stored(raw.sequence, raw.subject, raw.data, raw.headers)
                await self._admit(event.campaign, task, stored)
