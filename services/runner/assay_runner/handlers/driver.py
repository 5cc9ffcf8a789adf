"""The runner's driver: a run whose sandbox is ready driven to its end (its agent's
steps logged, or a program run), or ended with a RunFailed."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from assay.bus import Delivery, waiting_aside
from assay.controls import campaign_salt
from assay.providers import (
    DEFAULT_PRICES,
    DevCached,
    ModelCache,
    ModelProvider,
    PriceTable,
    pinned_prices,
    provider_for,
)
from assay.sandbox_client import DriveHeld, SandboxClient, SandboxGone
from assay.security.controls import SealBroken
from assay.telemetry import meter
from assay_schemas import (
    AgentFinished,
    AgentSpec,
    AgentStepLogged,
    AssayError,
    ControlDetails,
    ControlPlan,
    ErrorInfo,
    Event,
    FailureStage,
    RunFailed,
    RunFault,
    RunHistory,
    RunRequested,
    SandboxReady,
    same_run,
)

from ..agent import AgentRun
from ..book import AgentBook, Observed, Work
from ..choice import choose_plan, playing, weighs_kinds
from ..clients import ModelClients
from ..control import ControlProvider, plan_work
from ..program import ProgramFailed, ProgramRun
from ..styles import FirstAnswers
from ..tools import ToolBox
from ..web import NetPolicy, WebProvider, web_for
from .base import RunnerBase

__all__ = ["ChoiceLost", "Driver", "ProviderFactory", "RunGivenUp"]

log = logging.getLogger("assay.runner")

RUNS_IN_FLIGHT = meter("assay.runner").create_up_down_counter(
    "assay.runs.in_flight", description="Agent runs being driven by this runner"
)

ProviderFactory = Callable[[AgentSpec], ModelProvider]

CHOICE_POLL_S = 0.1
"""How often a control waiting for its look-alike's run to answer reads the book."""


class RunGivenUp(AssayError):
    """The runner stopped retrying a run (its SandboxReady was dead-lettered)."""


class ChoiceLost(RunFault):
    """A resumed run's first step holds a sealed choice that does not open here or names
    no plan of its task: what it was playing is unknown, so it cannot go on (the
    platform's failure: another deployment's secret, or a tampered log)."""


@dataclass(kw_only=True)
class Driver(RunnerBase):
    """Turns runs into logged agent steps."""

    providers: ProviderFactory = provider_for
    web_net: NetPolicy = field(default_factory=NetPolicy)
    """How web tools reach the network (resolver, test-only loopback); each campaign's
    `web:` section adds its lists and mode per run."""
    prices: PriceTable = field(default_factory=lambda: dict(DEFAULT_PRICES))
    model_cache_dir: Path | None = None
    """Where the development cache keeps answers (``<home>/cache/models``), for campaigns
    that say ``cache:``; None: such campaigns ask the model every time (warned)."""

    claim_poll_s: float = 2.0
    """How often a drive that finds its run's sandbox held by another drive reads the log
    for the run's end and claims the sandbox again."""

    choice_wait_s: float = 30.0
    """How long a control that chooses before any of its look-alike's runs answered here
    waits for one (see `_look_alikes_works`): a scripted or fast model's run answers
    within it. A slow model's, or a look-alike whose runs another replica drives, costs
    a control among a campaign's first runs this much time, not a drive."""

    _drives: str = field(default_factory=lambda: uuid.uuid4().hex)
    """This process's part of its drive ids (see `_drive_id`)."""

    book: AgentBook = field(default_factory=AgentBook)
    """How the campaign's agents' runs behave here (what their controls imitate)."""
    _works: dict[str, Work] = field(default_factory=dict)
    """The kind of work of each control plan read so far (plans are immutable blobs)."""
    _first_answers: FirstAnswers | None = None
    _clients: ModelClients | None = None

    @property
    def first_answers(self) -> FirstAnswers:
        """Each campaign agent's first answer's opening, as the log shows it (what a
        control's answer opens with)."""
        if self._first_answers is None:
            self._first_answers = FirstAnswers(bus=self.bus)
        return self._first_answers

    @property
    def clients(self) -> ModelClients:
        """The model clients leased to runs (made on first use from `providers`)."""
        if self._clients is None:
            self._clients = ModelClients(self.providers)
        return self._clients

    async def aclose(self) -> None:
        """Close every provider's HTTP client."""
        if self._clients is not None:
            await self._clients.aclose()

    # --- running ------------------------------------------------------------------------

    async def on_sandbox_ready(self, event: SandboxReady, delivery: Delivery) -> None:
        """Run (or resume) the agent of a run whose sandbox is ready."""
        # A redelivery while this process still drives the run waits in the bus (one
        # delivery of a message at a time per process); one handed to another process
        # meets the sandbox's lease (`_claim`): two agent loops must never share a sandbox.
        RUNS_IN_FLIGHT.add(1)
        try:
            await self._run(event, delivery)
        finally:
            RUNS_IN_FLIGHT.add(-1)

    async def _run(self, event: SandboxReady, delivery: Delivery) -> None:
        assert event.run_id is not None
        sandbox = SandboxClient(
            bus=self.bus,
            instance=event.instance,
            sandbox_id=event.sandbox_id,
            store=self.store,
            drive_id=self._drive_id(delivery),
        )
        gone: SandboxGone | None = None
        lease_s = 0.0
        try:  # the lease first, then the log: what it holds then is all another drive did
            lease_s = await self._claim(event, sandbox)
            if not lease_s:
                return
        except SandboxGone as e:  # the run's end destroyed it, or its instance is gone
            gone = e
        renewing = asyncio.create_task(self._renew(sandbox, lease_s)) if lease_s else None
        try:
            await self._drive(event, delivery, sandbox, gone)
        finally:
            if renewing is not None:
                renewing.cancel()

    async def _drive(
        self,
        event: SandboxReady,
        delivery: Delivery,
        sandbox: SandboxClient,
        gone: SandboxGone | None,
    ) -> None:
        """Drive the run from its log, this drive holding its sandbox."""
        assert event.run_id is not None
        events = await self.bus.run_events(
            event.campaign_id, event.run_id, known={delivery.sequence: event}
        )
        history = RunHistory.fold(events)
        if history.ended is not None:
            return
        request = history.request
        assert request is not None, f"run {event.run_id} has SandboxReady but no RunRequested"
        if gone is not None:
            await self.end_with_fault(request, event, gone)
            return
        steps = history.steps
        if steps:
            log.info("run %s: resuming after step %d", event.run_id, steps[-1].step)
        try:
            if request.agent.kind == "program":
                await self._program_run(request, event, sandbox).run(steps, delivery.attempt)
            else:
                web = await web_for(request, bus=self.bus, store=self.store, net=self.web_net)
                control = await self._control_of(request)
                style: str | None = None
                if control is not None:
                    control = await self._chosen(request, control, steps)
                    # its plan's steps, whatever the agent's limit
                    most = max(request.limits.max_steps, control.max_steps)
                    limits = request.limits.model_copy(update={"max_steps": most})
                    request = request.model_copy(update={"limits": limits})
                    style = await self._house_style(request, control)
                with self._provider(request, control, style) as provider:
                    if isinstance(provider, ControlProvider):
                        await provider.prepare()
                    run = self._agent_run(request, event, sandbox, steps, web, provider)
                    run.sealed_choice = self._sealed_choice(request, control)
                    await run.run(steps)
        except RunFault as e:  # the class says whose failure the run's end is
            await self.end_with_fault(request, event, e)

    def _drive_id(self, delivery: Delivery) -> str:
        """The fencing token of one delivery's drive: unique to this process and delivery,
        and kept when the bus runs the handler again through an outage (that drive ended:
        its successor must not wait out its lease)."""
        return f"{self._drives}-{delivery.sequence}-{delivery.attempt}"

    async def _claim(self, event: SandboxReady, sandbox: SandboxClient) -> float:
        """Hold the run's sandbox for this drive: the lease time, or 0 when the run ended
        meanwhile.

        While another drive holds it (this delivery is a second one: a consumer leader
        lost while a runner still drives the run), this one waits, its message kept in
        progress by the bus, until the run ends or the holder stalls past the manager's
        lease time (its runner died): then it takes over and drives from the log."""
        assert event.run_id is not None
        waited = False
        while True:
            try:
                lease_s = await sandbox.claim()
            except DriveHeld:
                if not waited:
                    log.info("run %s: another drive holds its sandbox; waiting", event.run_id)
                    waited = True
            else:
                if waited:
                    log.warning("run %s: its other drive stalled; taking it over", event.run_id)
                return lease_s
            if await self._ends(event):
                return 0.0
            await asyncio.sleep(self.claim_poll_s)

    @staticmethod
    async def _renew(sandbox: SandboxClient, lease_s: float) -> None:
        """Claim the sandbox again every third of its lease while this drive runs: a
        drive waiting on its model, or on a long command, is at work, not stalled. Once
        taken over it stops; its next command is refused (DriveSuperseded)."""
        while True:
            await asyncio.sleep(lease_s / 3)
            try:
                lease_s = await sandbox.claim()
            except DriveHeld:
                return
            except Exception:  # the bus or the sandbox failing: the drive's commands say so
                log.info(
                    "renewing the lease of sandbox %s failed", sandbox.sandbox_id, exc_info=True
                )

    async def _ends(self, event: SandboxReady) -> list[Event]:
        """The run's ends on the log (its AgentFinished or RunFailed), none while it runs."""
        assert event.run_id is not None
        return await self.bus.run_events(
            event.campaign_id, event.run_id, types=(AgentFinished, RunFailed)
        )

    async def end_with_fault(
        self, request: RunRequested, ready: SandboxReady, fault: RunFault
    ) -> None:
        """End the run with `fault` (a RunFailed whose class says whose failure it is),
        unless the run has ended meanwhile: a drive retried after the bus failed, or
        redelivered to another replica, can read the run's history from before its end and
        then find the sandbox sealed and gone. That fault is not the run's end; published,
        it would be refused as a second one."""
        ends = await self._ends(ready)
        if ends:
            what = ends[0].event_type
            log.info("run %s ended (%s) before this fault: not ended again", ready.run_id, what)
            return
        await self._fail(
            request,
            ready,
            "agent",
            ErrorInfo.of(fault),
            error=fault.flat(),
            infrastructure=fault.fault == "platform",
            output_sha256=fault.output_sha256 if isinstance(fault, ProgramFailed) else None,
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

    async def _chosen(
        self, request: RunRequested, control: ControlDetails, steps: list[AgentStepLogged]
    ) -> ControlDetails:
        """The declaration the control plays: the plan its first step's sealed choice
        names when it has one (a resumed run), else the one `choose_plan` draws now."""
        assert self.controls is not None  # a declaration opened here
        declared = await self._controls_of(request.campaign_id)
        if steps:
            return self._played(request, control, declared, steps[0])
        if not control.chooses:
            return control
        works = {
            d.plan_sha256: await self._plan_work(d.plan_sha256)
            for d in declared
            if (d.campaign_id, d.task_id) == (control.campaign_id, control.task_id)
        }
        known = {plan: work for plan, work in works.items() if work is not None}
        attached = bool(request.task.attachments)
        if weighs_kinds(control, declared, known):
            seen = await self._look_alikes_works(request.campaign_id, control.like, attached)
        else:  # one kind on offer (or one plan): no answer of its look-alike moves the draw
            seen = self.book.works(request.campaign_id, control.like, attached=attached)
        pooled = self.book.campaign_works(request.campaign_id, attached=attached)
        salt = campaign_salt(self.controls.secret, request.campaign_id)
        return choose_plan(
            control, declared, known, seen, key=salt, run_id=request.run_id or "", pooled=pooled
        )

    async def _look_alikes_works(
        self, campaign_id: str, like: str | None, attached: bool
    ) -> Counter[Work]:
        """The look-alike's kinds of work on tasks with files `attached` or not; where it
        has answered none yet, waits for one, aside (its drive's worker slot goes to the
        next run, so controls waiting never hold up the runs they wait for), at most
        `choice_wait_s`: one choosing before any of them answered drew every kind alike,
        and played work its look-alike never did (7-11 of a bundled campaign's 40
        controls chose so; 4-11 of them played a kind their look-alike never did on tasks
        like theirs over six campaigns, none over four since they wait; 2026-12-07)."""
        seen = self.book.works(campaign_id, like, attached=attached)
        if seen or like is None:
            return seen
        deadline = time.monotonic() + self.choice_wait_s
        async with waiting_aside():
            while not seen and time.monotonic() < deadline:
                await asyncio.sleep(CHOICE_POLL_S)
                seen = self.book.works(campaign_id, like, attached=attached)
        return seen

    def _played(
        self,
        request: RunRequested,
        control: ControlDetails,
        declared: list[ControlDetails],
        first: AgentStepLogged,
    ) -> ControlDetails:
        """The declaration a resumed control was playing, as its first step sealed it."""
        assert self.controls is not None
        if first.sealed_choice is None:
            return control  # logged before choices were sealed: the declared plan
        try:
            plan = self.controls.open_choice(
                request.campaign_id, request.run_id or "", first.sealed_choice
            )
        except SealBroken as e:
            raise ChoiceLost(str(e)) from e
        for d in declared:
            if (d.campaign_id, d.task_id, d.plan_sha256) == (
                control.campaign_id,
                control.task_id,
                plan,
            ):
                return playing(control, d)
        raise ChoiceLost(f"run {request.run_id}: the plan its first step chose is not its task's")

    async def _plan_work(self, plan_sha256: str) -> Work | None:
        """The kind of work a stored plan does (None: it does not read, and is not offered)."""
        if plan_sha256 not in self._works:
            try:
                data = await asyncio.to_thread(self.store.get_bytes, plan_sha256)
                self._works[plan_sha256] = plan_work(ControlPlan.model_validate_json(data))
            except Exception:  # the store's errors, a bad plan: its own run meets them
                log.warning("control plan %s does not read", plan_sha256[:12], exc_info=True)
                return None
        return self._works[plan_sha256]

    def _sealed_choice(self, request: RunRequested, control: ControlDetails | None) -> str | None:
        """What the run's first step seals: the plan it plays, or none for an agent's run
        (the same length: no reader without the secret tells them apart)."""
        if self.controls is None:
            return None
        plan = control.plan_sha256 if control is not None else None
        return self.controls.seal_choice(request.campaign_id, request.run_id or "", plan)

    def _provider(
        self, request: RunRequested, control: ControlDetails | None, house_style: str | None
    ) -> AbstractContextManager[ModelProvider]:
        """A control's plan (`control`, answering in `house_style`), or a model client
        leased for the run."""
        if control is not None:
            return nullcontext(self._control_provider(request, control, house_style))
        return self._observed(request)

    def _control_provider(
        self, request: RunRequested, control: ControlDetails, house_style: str | None
    ) -> ControlProvider:
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
            house_style=house_style,
        )

    async def _house_style(self, request: RunRequested, control: ControlDetails) -> str | None:
        """The opening of the control's look-alike's first answer in the log (see
        `assay_runner.styles`; None: it wears no agent, or the look-alike had answered
        nothing after half the control's time)."""
        if control.like is None:
            return None
        most_s = request.limits.wall_clock_s / 2
        return await self.first_answers.opening(request.campaign_id, control.like, most_s=most_s)

    @contextmanager
    def _observed(self, request: RunRequested) -> Iterator[ModelProvider]:
        """A model client leased for the run, its turns counted in the book."""
        with self.clients.lease(request.agent) as leased:
            yield Observed(
                inner=self._dev_cached(request, leased),
                book=self.book,
                campaign_id=request.campaign_id,
                agent_id=request.agent.agent_id,
                run_id=request.run_id or "",
            )

    def _dev_cached(self, request: RunRequested, provider: ModelProvider) -> ModelProvider:
        """`provider` behind the development cache when the campaign asks for one."""
        if request.cache is None:
            return provider
        if self.model_cache_dir is None:
            log.warning("run %s: campaign asks for cache: but this runner has none", request.run_id)
            return provider
        return DevCached(
            inner=provider,
            cache=ModelCache(self.model_cache_dir, request.cache.ttl),
            base_url=request.agent.base_url or f"{request.agent.provider} default",
            epoch=request.epoch,
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
