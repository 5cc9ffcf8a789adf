"""The runner's door: a submitted task admitted or refused, its runs (and its controls')
requested, the submitter answered; a started campaign's tasks admitted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict, deque
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

__all__ = ["ADMISSIONS_IN_FLIGHT", "REQUESTS_IN_FLIGHT", "Door", "admissions_in_flight"]

log = logging.getLogger("assay.runner")

ADMISSIONS_IN_FLIGHT = 64
"""Submissions one runner admits at once, at the least (and a started campaign's catch-up
admits at once). An admission is a few round trips to the log (the campaign, the task id's
earlier run, each run's request, the answer), mostly waiting: one at a time, a busy runner
admitted a 300-task campaign over 14 s, so its runs started that late; 16 at a time, a
500-task campaign's first wave was requested 18 s after submission. Admissions of one task
id still go one at a time (`_TaskLocks`). A runner that drives more runs at once admits as
many (`admissions_in_flight`)."""


def admissions_in_flight(concurrency: int) -> int:
    """Submissions a runner driving `concurrency` runs at once admits at once: as many, and
    `ADMISSIONS_IN_FLIGHT` at the least. Once its first runs are driven, every round trip
    of an admission waits its turn on a busy event loop; at 64 at a time, a 500-run first
    wave took eight rounds of admissions, 4-7 s on two cores, against 1.3-1.5 s with 256
    or 512 at a time (docs/scale.md, "Admission"). An admission holds no more than a run
    does (its task), so the memory this allows is what the concurrency allows already."""
    return max(ADMISSIONS_IN_FLIGHT, concurrency)


REQUESTS_IN_FLIGHT = 32
"""A task's run requests in flight at once, after its first (many epochs or agents)."""


ANSWERS_REMEMBERED = 65536
"""Submissions a runner remembers having answered (the oldest forgotten first): a started
campaign's catch-up and the task consumer both admit its tasks, and the second admission
of one, once the first answered it, would only ask the log again what the first wrote."""


@dataclass
class _Answered:
    """Submission event ids this process answered (the answer acknowledged by the log)."""

    _ids: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def add(self, event_id: str) -> None:
        self._ids[event_id] = None
        if len(self._ids) > ANSWERS_REMEMBERED:
            self._ids.popitem(last=False)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids


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

    admissions: int = ADMISSIONS_IN_FLIGHT
    """Submissions admitted at once, by the task consumer and a campaign's catch-up
    (`admissions_in_flight`)."""

    _scheduling: set[str] = field(default_factory=set)
    """Run ids this process is publishing now: the campaign and the task handler may both
    schedule a task's runs at once, and each run must start one trace, not two."""
    _admitting: _TaskLocks = field(default_factory=_TaskLocks)
    _answered: _Answered = field(default_factory=_Answered)
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
        their subjects (its task id taken first, by this runner or another) stops it.

        The first run goes alone: of two tasks under one id, whichever requests it first
        owns the id, and the other stops there having requested nothing. The rest then go
        up to `REQUESTS_IN_FLIGHT` at a time, started in plan order (one connection keeps
        that order on the log); a taken one stops what has not started yet."""
        task_span = trace.get_current_span().get_span_context()
        if not runs:
            return None
        taken = await self._schedule_once(runs[0], task_span)
        pending: deque[asyncio.Task[RunRequested | None]] = deque()
        try:
            for run in runs[1:]:
                if taken is not None:
                    break
                pending.append(asyncio.create_task(self._schedule_once(run, task_span)))
                if len(pending) >= REQUESTS_IN_FLIGHT:
                    taken = await pending.popleft()
            while pending:
                found = await pending.popleft()
                taken = taken or found
        finally:
            for left in pending:  # an error in one: the others are not left running
                left.cancel()
        return taken

    async def _schedule_once(
        self, run: RunRequested, task_span: trace.SpanContext
    ) -> RunRequested | None:
        rid = run.run_id or ""
        if rid in self._scheduling:
            return None  # the other handler of the campaign/task race is on it
        self._scheduling.add(rid)
        try:
            return await self._schedule_one(run, task_span)
        finally:
            self._scheduling.discard(rid)

    async def _schedule_one(
        self, run: RunRequested, task_span: trace.SpanContext
    ) -> RunRequested | None:
        of_run = self.bus.subjects.run(run.campaign_id, run.run_id or "")
        # The request is conditioned on the run's subjects being empty, so JetStream tells
        # whether it was requested (or cancelled) before: no lookup first, one round trip
        # less per run. A program run still looks first: its gateway folder is made before
        # the request, and must not be made again for a run that has ended.
        program = run.sandbox.gateway_dir is not None
        if (not program or not await self.bus.last_sequence(of_run)) and await self._request(
            run, task_span
        ):
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
        # One trace per run: a new root, linked to the task that caused it. Ended only
        # when the request is logged: a request the log refused (asked again by the other
        # handler, or on a redelivery) never happened, and its span is dropped unexported.
        links = [trace.Link(task_span)] if task_span.is_valid else []
        span = tracer("assay.runner").start_span(
            f"run {run.run_id}", context=Context(), links=links
        )
        span.set_attribute("assay.run_id", run.run_id or "")
        span.set_attribute("assay.agent_id", run.agent.agent_id)
        # Stamped when sent, not when planned: a request's time is its place in the
        # task's order (controls planned a moment later must not arrive "later").
        run = run.model_copy(update={"occurred_at": datetime.now(UTC)})
        of_run = self.bus.subjects.run(run.campaign_id, run.run_id or "")
        try:
            with trace.use_span(span, end_on_exit=False):
                published = await self.bus.publish(run, unchanged=Unchanged(of_run, 0))
        except LogChanged:
            return False
        except BaseException:
            span.end()  # recorded as failed by use_span, as before
            raise
        if published.duplicate:
            return False
        span.end()
        return True

    async def _admit(
        self, campaign: CampaignSpec | None, event: TaskSubmitted, stored: Stored
    ) -> None:
        """Answer a submission: refuse it, or accept it and schedule its runs."""
        async with self._admitting.hold(event.campaign_id, event.task.task_id):
            if event.event_id in self._answered:
                return  # by this process, under this lock: its answer is on the log
            await self._answer(campaign, event, stored)

    async def _answer(
        self, campaign: CampaignSpec | None, event: TaskSubmitted, stored: Stored
    ) -> None:
        rejected = await self.admission.rejection(event, campaign, stored)
        if rejected is not None or campaign is None:
            if rejected is not None:
                log.info("task %s refused: %s", event.task.task_id, rejected.detail)
                await self.bus.publish(rejected)
                self._answered.add(event.event_id)
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
            self._answered.add(event.event_id)
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
        self._answered.add(event.event_id)

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
        # As many at once as the task consumer admits.
        slots = asyncio.Semaphore(self.admissions)
        admitting: set[asyncio.Task[None]] = set()

        async def admit(task: TaskSubmitted, stored: Stored) -> None:
            try:
                await self._admit(event.campaign, task, stored)
            finally:
                slots.release()

        try:
            # Raw messages: admission checks each submission's signature over its bytes.
            async for raw in read_raw(self.bus.js, self.bus.stream.name, subject=subject):
                try:
                    task = parse_event(raw.data, subject=raw.subject)
                except InvalidEvent:  # the live consumer answers what does not parse
                    continue
                if isinstance(task, TaskSubmitted) and task.event_id not in refused:
                    stored = Stored(raw.sequence, raw.subject, raw.data, raw.headers)
                    await slots.acquire()
                    admitting.add(asyncio.create_task(admit(task, stored)))
                    admitting = {t for t in admitting if not t.done() or not _settled(t)}
                    if any(t.done() for t in admitting):
                        break  # one failed: no more started, as when they went one by one
            # The first error fails the delivery (redelivered, the catch-up runs again).
            await asyncio.gather(*admitting)
        finally:
            for t in admitting:
                t.cancel()


def _settled(task: asyncio.Task[None]) -> bool:
    """A finished admission that can be forgotten: it raised nothing to report."""
    return not task.cancelled() and task.exception() is None
