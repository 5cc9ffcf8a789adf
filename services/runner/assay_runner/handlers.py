"""Runner: schedule runs from campaigns and tasks; drive each run's agent in its sandbox."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from opentelemetry import trace
from opentelemetry.context import Context

from assay.bus import Bus, Delivery, Refusal, Unchanged, read_campaign, read_raw
from assay.providers import (
    DEFAULT_PRICES,
    ModelProvider,
    PriceTable,
    ProviderError,
    pinned_prices,
    provider_for,
)
from assay.sandbox_client import SandboxClient, SandboxGone
from assay.security.signing import TrustList, trust_for
from assay.store import BlobStore
from assay.telemetry import meter, tracer
from assay_schemas import (
    AgentSpec,
    AgentStepLogged,
    AssayError,
    CampaignSpec,
    CampaignStarted,
    ControlDeclared,
    ErrorInfo,
    Event,
    FailureStage,
    InvalidEvent,
    LogChanged,
    RunFailed,
    RunHistory,
    RunRequested,
    SandboxReady,
    TaskAccepted,
    TaskRejected,
    TaskSubmitted,
    parse_event,
    same_run,
)

from .admission import Admission, Stored, answering
from .agent import AgentRun, AnswerNotStored, StepTooLarge
from .book import AgentBook, Observed
from .clients import ModelClients
from .control import ControlProvider
from .program import ProgramFailed, ProgramRun
from .scheduler import control_runs, interleave, plan_runs
from .tools import ToolBox
from .web import NetPolicy, WebCacheUnreadable, WebProvider, web_for

__all__ = ["ADMISSIONS_IN_FLIGHT", "ProviderFactory", "RunGivenUp", "RunnerService"]

log = logging.getLogger("assay.runner")

RUNS_IN_FLIGHT = meter("assay.runner").create_up_down_counter(
    "assay.runs.in_flight", description="Agent runs being driven by this runner"
)

ProviderFactory = Callable[[AgentSpec], ModelProvider]

ADMISSIONS_IN_FLIGHT = 16
"""Submissions one runner admits at once. An admission is a few round trips to the log
(the campaign, the task id's earlier run, the answer, each run's request); one at a time,
a busy runner admitted a 300-task campaign over 14 s, so its runs started that late.
Admissions of one task id still go one at a time (`_TaskLocks`)."""


class RunGivenUp(AssayError):
    """The runner stopped retrying a run (its SandboxReady was dead-lettered)."""


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
class RunnerService:
    """Turns campaigns and tasks into runs, and runs into logged agent steps."""

    bus: Bus
    store: BlobStore
    providers: ProviderFactory = provider_for
    web_net: NetPolicy = field(default_factory=NetPolicy)
    """How web tools reach the network (resolver, test-only loopback); each campaign's
    `web:` section adds its lists and mode per run."""
    prices: PriceTable = field(default_factory=lambda: dict(DEFAULT_PRICES))
    gateway_root: Path | None = None
    """Where program runs' gateway folders are made (a host path sandboxes can traverse)."""

    trust: TrustList | None = None
    """Whose signatures count on submissions; None: this deployment's (`trust_for`)."""

    book: AgentBook = field(default_factory=AgentBook)
    """How the campaign's agents' runs behave here (what their controls imitate)."""

    _clients: ModelClients | None = None
    _scheduling: set[str] = field(default_factory=set)
    """Run ids this process is publishing now: the campaign and the task handler may both
    schedule a task's runs at once, and each run must start one trace, not two."""
    _admitting: _TaskLocks = field(default_factory=_TaskLocks)
    _controls: dict[str, list[ControlDeclared]] = field(default_factory=dict)
    """Each campaign's control declarations, read once: the submitter declares them all
    before its first task, so the first admission already finds every one."""
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

    @property
    def clients(self) -> ModelClients:
        """The model clients leased to runs (made on first use from `providers`)."""
        if self._clients is None:
            self._clients = ModelClients(self.providers)
        return self._clients

    async def start(self) -> None:
        """Start consuming campaigns, tasks and ready sandboxes."""
        await self.bus.start()

    async def stop(self) -> None:
        """Stop consuming, then close the providers' HTTP clients."""
        await self.bus.stop()
        await self.aclose()

    async def aclose(self) -> None:
        """Close every provider's HTTP client."""
        if self._clients is not None:
            await self._clients.aclose()

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
        subject = self.bus.subjects.of(run)
        if not await self.bus.last_sequence(subject) and await self._request(run, task_span):
            return None
        # Requested before: a redelivery, the campaign/task race, or another runner that
        # admitted a different task under this id at the same time (which is the one run).
        try:
            earlier = await self.bus.last_event(subject)
        except InvalidEvent:
            return None  # no event: the aggregator refuses it, and nothing is compared
        if isinstance(earlier, RunRequested) and earlier.task != run.task:
            return earlier
        return None

    async def _request(self, run: RunRequested, task_span: trace.SpanContext) -> bool:
        """Log the run's request if its subject is still empty; False when another
        publisher's got there first (stored, or its event id seen by JetStream)."""
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
                published = await self.bus.publish(
                    run, unchanged=Unchanged(self.bus.subjects.of(run), 0)
                )
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
        rejected = await self.admission.refusal(event, campaign, stored)
        if rejected is not None or campaign is None:
            if rejected is not None:
                log.info("task %s refused: %s", event.task.task_id, rejected.detail)
                await self.bus.publish(rejected)
            return
        declared = await self._controls_of(event.campaign_id)
        runs = plan_runs(
            campaign,
            event.task,
            producer=self.bus.producer,
            cause=event.event_id,
            gateway_root=self.gateway_root,
        )
        # The task's controls among its agents' runs, each at its declared slot: requested
        # by this runner like the others, so neither their order nor their producer tells.
        controls = control_runs(
            campaign, event.task, declared, producer=self.bus.producer, cause=event.event_id
        )
        runs = interleave(runs, controls)
        # Runs first, the answer after: a submission whose runs another runner requested
        # for a different task under the same id in the meantime is refused, not told yes.
        taken = await self._schedule(runs)
        if taken is not None:
            rejected = self.admission.taken(event, stored.sequence, taken)
            log.info("task %s refused: %s", event.task.task_id, rejected.detail)
            await self.bus.publish(rejected)
            return
        await self.bus.publish(
            TaskAccepted(
                event_id=TaskAccepted.id_for(event.event_id),
                **answering(event, self.bus.producer),
                run_ids=[r.run_id or "" for r in runs],
            )
        )

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

    async def _controls_of(self, campaign_id: str) -> list[ControlDeclared]:
        """The campaign's control declarations (read from the log once)."""
        if campaign_id not in self._controls:
            subject = self.bus.subjects.event("ControlDeclared", campaign_id, "-")
            self._controls[campaign_id] = [
                logged.event
                async for logged in self.bus.replay(subject=subject)
                if isinstance(logged.event, ControlDeclared)
            ]
        return self._controls[campaign_id]

    async def _control_of(self, request: RunRequested) -> ControlDeclared | None:
        """The declaration of the control a run request is an attempt of, if any: its
        task, agent and epoch (`assay retry` makes later attempts under new run ids)."""
        for d in await self._controls_of(request.campaign_id):
            if (d.task_id, d.agent_id, d.epoch) == (request.task_id, request.agent.agent_id, request.epoch):  # fmt: skip
                return d
        return None

    # --- running ------------------------------------------------------------------------

    async def on_sandbox_ready(self, event: SandboxReady, delivery: Delivery) -> None:
        """Run (or resume) the agent of a run whose sandbox is ready."""
        # A redelivery while this process still drives the run waits in the bus (one
        # delivery of a message at a time per process): a second agent loop would race
        # the first on one sandbox.
        RUNS_IN_FLIGHT.add(1)
        try:
            await self._run(event, delivery)
        finally:
            RUNS_IN_FLIGHT.add(-1)

    async def _run(self, event: SandboxReady, delivery: Delivery) -> None:
        assert event.run_id is not None
        events = await self.bus.run_events(
            event.campaign_id, event.run_id, known={delivery.sequence: event}
        )
        history = RunHistory.fold(events)
        if history.ended is not None:
            return
        request = history.request
        assert request is not None, f"run {event.run_id} has SandboxReady but no RunRequested"
        steps = history.steps
        if steps:
            log.info("run %s: resuming after step %d", event.run_id, steps[-1].step)
        sandbox = SandboxClient(
            bus=self.bus, instance=event.instance, sandbox_id=event.sandbox_id, store=self.store
        )
        try:
            if request.agent.kind == "program":
                await self._program_run(request, event, sandbox).run(steps, delivery.attempt)
            else:
                web = await web_for(request, bus=self.bus, store=self.store, net=self.web_net)
                control = await self._control_of(request)
                if control is not None:  # its plan's steps, whatever the agent's limit
                    most = max(request.limits.max_steps, control.max_steps)
                    limits = request.limits.model_copy(update={"max_steps": most})
                    request = request.model_copy(update={"limits": limits})
                with self._provider(request, control) as provider:
                    run = self._agent_run(request, event, sandbox, steps, web, provider)
                    await run.run(steps)
        except SandboxGone as e:
            await self._fail(
                request,
                event,
                "agent",
                ErrorInfo.of(e),
                error=f"sandbox disappeared: {e}",
                infrastructure=True,
            )
        except ProviderError as e:
            await self._fail(request, event, "agent", ErrorInfo.of(e), infrastructure=True)
        except (AnswerNotStored, WebCacheUnreadable) as e:  # the store's fault, not the agent's
            await self._fail(
                request, event, "agent", ErrorInfo.of(e), error=str(e), infrastructure=True
            )
        except StepTooLarge as e:  # the agent's own output: scored as its failure
            await self._fail(
                request, event, "agent", ErrorInfo.of(e), error=str(e), infrastructure=False
            )
        except ProgramFailed as e:
            await self._fail(
                request,
                event,
                "agent",
                ErrorInfo.of(e),
                error=str(e),
                infrastructure=e.infrastructure,
                output_sha256=e.output_sha256,
            )

    async def on_run_given_up(self, event: Event, delivery: Delivery, reason: str) -> None:
        """End a run whose SandboxReady failed on every delivery: without a RunFailed it
        would never end, and its sandbox would live until the stack stops (the
        sandbox-manager seals and destroys it on the RunFailed)."""
        assert isinstance(event, SandboxReady) and event.run_id is not None
        events = await self.bus.run_events(event.campaign_id, event.run_id)
        history = RunHistory.fold(events)
        if history.ended is not None or history.request is None:
            return
        error = RunGivenUp(
            f"gave up on run {event.run_id} after {delivery.attempt} deliveries of its "
            f"SandboxReady; the last failed with {reason}"
        )
        await self._fail(history.request, event, "agent", ErrorInfo.of(error), infrastructure=True)

    def _provider(
        self, request: RunRequested, control: ControlDeclared | None
    ) -> AbstractContextManager[ModelProvider]:
        """A control's plan (`control`), or a model client leased for the run."""
        if control is not None:
            return nullcontext(self._control_provider(request, control))
        return self._observed(request)

    def _control_provider(self, request: RunRequested, control: ControlDeclared) -> ControlProvider:  # fmt: skip
        """A control's plan, played like the agent it looks like as this runner saw it."""
        return ControlProvider(
            plan_sha256=control.plan_sha256,
            store=self.store,
            model_name=request.agent.model,
            book=self.book,
            campaign_id=request.campaign_id,
            like=control.like,
            run_id=request.run_id or "",
            max_steps=request.limits.max_steps,
        )

    @contextmanager
    def _observed(self, request: RunRequested) -> Iterator[ModelProvider]:
        """A model client leased for the run, its turns counted in the book."""
        with self.clients.lease(request.agent) as inner:
            yield Observed(
                inner=inner,
                book=self.book,
                campaign_id=request.campaign_id,
                agent_id=request.agent.agent_id,
                run_id=request.run_id or "",
            )

    def _agent_run(
        self,
        request: RunRequested,
        event: SandboxReady,
        sandbox: SandboxClient,
        steps: list[AgentStepLogged],
        web: WebProvider,
        provider: ModelProvider,
    ) -> AgentRun:
        """The model-driven run, on the model client leased to it."""
        tools = ToolBox(
            sandbox=sandbox,
            web=web,
            store=self.store,
            limits=request.limits,
            exec_timeout_s=request.sandbox.exec_timeout_s,
            resumed_python=any(c.name == "python" for s in steps for c in s.tool_calls),
        )
        return AgentRun(
            bus=self.bus,
            request=request,
            ready=event,
            provider=provider,
            tools=tools,
            prices=pinned_prices(self.prices, request.prices),
            store=self.store,
        )

    def _program_run(
        self, request: RunRequested, event: SandboxReady, sandbox: SandboxClient
    ) -> ProgramRun:
        """The run of a program agent (a command, no model)."""
        return ProgramRun(
            bus=self.bus,
            store=self.store,
            request=request,
            ready=event,
            sandbox=sandbox,
            prices=pinned_prices(self.prices, request.prices),
        )

    async def _fail(
        self,
        request: RunRequested,
        cause: Event,
        stage: FailureStage,
        info: ErrorInfo,
        *,
        error: str | None = None,
        infrastructure: bool,
        output_sha256: str | None = None,
    ) -> None:
        """Publish the run's RunFailed; `error` is its flat text (default: `info`'s)."""
        error = info.text if error is None else error
        log.warning("run %s failed at %s: %s", request.run_id, stage, error)
        await self.bus.publish(
            RunFailed(
                event_id=RunFailed.id_for(request.run_id, stage),
                **same_run(request, cause=cause),
                stage=stage,
                error=error,
                error_info=info,
                infrastructure=infrastructure,
                output_sha256=output_sha256,
                producer=self.bus.producer,
            )
        )
