"""What a judge needs to know about a sealed run, read back from the log."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import NamedTuple, TypedDict

from assay.bus import Bus, Delivery, publish_through_outages, read_campaign
from assay.store import BlobStore
from assay_schemas import (
    ArtifactsSealed,
    AssayError,
    CampaignSpec,
    CampaignStarted,
    ErrorInfo,
    Event,
    FileRef,
    JudgeRegistered,
    JudgeSpec,
    JudgmentFailed,
    JudgmentRecorded,
    Producer,
    Rubric,
    RunHistory,
    Task,
    TaskSubmitted,
    default_rubric,
)

__all__ = [
    "ALL_CAMPAIGNS",
    "JURY_TOKEN",
    "CampaignScope",
    "JudgeGivenUp",
    "LogReader",
    "RunContext",
    "SealedRunJudge",
    "VerdictEnvelope",
    "registration",
    "spec_hash",
    "task_rubric",
    "verdict_envelope",
]

ALL_CAMPAIGNS: frozenset[str] = frozenset({"*"})
"""Scope of a standalone judge that rejudges every campaign ("*" is never a campaign id)."""

CampaignScope = set[str] | frozenset[str] | None
"""None: only campaigns whose CampaignStarted lists the judge; a set: exactly those
campaigns (ALL_CAMPAIGNS: every one), whether they list the judge or not."""


JURY_TOKEN = "jury"
"""Campaign token of a JudgeRegistered from a judge not bound to named campaigns."""


def spec_hash(spec: JudgeSpec) -> str:
    """Stable hash of a judge spec: a changed spec registers anew."""
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:16]


def registration(spec: JudgeSpec, campaign_id: str, producer: Producer) -> JudgeRegistered:
    """A judge's JudgeRegistered for one campaign (or `JURY_TOKEN`), once per spec version."""
    return JudgeRegistered(
        event_id=JudgeRegistered.id_for(spec.judge_id, spec_hash(spec), campaign_id),
        campaign_id=campaign_id,
        judge=spec,
        producer=producer,
    )


class VerdictEnvelope(TypedDict):
    """Id, envelope and identity of one judge's verdict (or failure) on one sample of a
    run: every field but the verdict's own, checked where the event is built."""

    event_id: str
    campaign_id: str
    run_id: str | None
    task_id: str
    causation_id: str
    judge_id: str
    sample: int
    producer: Producer


def verdict_envelope(
    kind: type[JudgmentRecorded | JudgmentFailed],
    sealed: ArtifactsSealed,
    task: Task,
    judge_id: str,
    sample: int,
    producer: Producer,
) -> VerdictEnvelope:
    """Id, envelope and identity of one judge's verdict (or failure) on one sample of a run."""
    return VerdictEnvelope(
        event_id=kind.id_for(sealed.run_id, judge_id, sample),
        campaign_id=sealed.campaign_id,
        run_id=sealed.run_id,
        task_id=sealed.task_id or task.task_id,
        causation_id=sealed.event_id,
        judge_id=judge_id,
        sample=sample,
        producer=producer,
    )


def task_rubric(task: Task, campaign: CampaignSpec | None) -> Rubric:
    """The rubric a run is scored on: the task's own, else the campaign's, else the default."""
    if task.judge.rubric is not None:
        return task.judge.rubric
    return campaign.rubric if campaign is not None else default_rubric()


class RunContext(NamedTuple):
    """A sealed run with its task, rubric and the run's history so far."""

    sealed: ArtifactsSealed
    task: Task
    rubric: Rubric
    campaign: CampaignSpec | None
    history: RunHistory


@dataclass(kw_only=True)
class LogReader:
    """Reads campaigns, tasks and run histories back from the log (campaigns cached)."""

    bus: Bus
    store: BlobStore | None = None
    """Where seal manifests too large to inline are read from."""
    _campaigns: dict[str, CampaignSpec] = field(default_factory=dict)

    async def campaign(self, campaign_id: str) -> CampaignSpec | None:
        """The campaign's spec, or None when it was never declared on the log."""
        if campaign_id in self._campaigns:
            return self._campaigns[campaign_id]
        spec = await read_campaign(self.bus, campaign_id)
        if spec is not None:  # only found campaigns are cached: one may be declared later
            self._campaigns[campaign_id] = spec
        return spec

    async def campaign_ids(self) -> list[str]:
        """Every campaign declared on the log so far, in log order (specs cached)."""
        ids: list[str] = []
        subject = self.bus.subjects.event("CampaignStarted", "*", "-")
        async for logged in self.bus.replay(subject=subject):
            if isinstance(logged.event, CampaignStarted) and logged.event.campaign_id not in ids:
                self._campaigns.setdefault(logged.event.campaign_id, logged.event.campaign)
                ids.append(logged.event.campaign_id)
        return ids

    async def _task(self, sealed: ArtifactsSealed, history: RunHistory) -> Task:
        if history.task is not None:
            return history.task
        if sealed.task_id:
            subject = self.bus.subjects.event("TaskSubmitted", sealed.campaign_id, "-")
            async for logged in self.bus.replay(subject=subject):
                ev = logged.event
                if isinstance(ev, TaskSubmitted) and ev.task.task_id == sealed.task_id:
                    return ev.task
        # A seal published without its run request (external systems, tests): judge it
        # anyway, saying plainly that the request is unknown.
        return Task(
            task_id=sealed.task_id or "unknown", prompt="(the task's request is not on the log)"
        )

    async def context(self, sealed: ArtifactsSealed, campaign: CampaignSpec | None) -> RunContext:
        """Everything needed to judge `sealed`."""
        run_id = sealed.run_id
        assert run_id is not None, f"ArtifactsSealed {sealed.event_id} has no run id"
        if sealed.manifest is not None and self.store is not None:
            sealed = await asyncio.to_thread(sealed.resolved, self.store.get_bytes)
        history = RunHistory.fold(await self.bus.run_events(sealed.campaign_id, run_id))
        task = await self._task(sealed, history)
        rubric = task_rubric(task, campaign)
        return RunContext(sealed, task, rubric, campaign, history)


class JudgeGivenUp(AssayError):
    """A sealed run a judge could not judge on any delivery (each failed, or the last was
    lost with its consumer): the platform's failure, recorded for each sample owed."""


@dataclass(kw_only=True)
class SealedRunJudge:
    """What every judge service shares: its bus, store, scope and log reader; its start
    (connect, announce the judge, consume); and how its verdicts go out."""

    bus: Bus
    store: BlobStore
    campaigns: CampaignScope = None
    log_reader: LogReader | None = None

    def __post_init__(self) -> None:
        self.reader = self.log_reader or LogReader(bus=self.bus, store=self.store)

    def accepts(self, campaign_id: str, campaign: CampaignSpec | None) -> bool:
        """Whether this judge judges runs of the campaign."""
        raise NotImplementedError

    async def register(self) -> None:
        """Publish the judge's JudgeRegistered."""
        raise NotImplementedError

    async def start(self) -> None:
        """Connect, announce the judge, then start consuming."""
        await self.bus.connect()
        await self.register()
        await self.bus.start()

    async def announce(self, spec: JudgeSpec, campaign_id: str) -> None:
        """Publish the judge's JudgeRegistered for one campaign (or `JURY_TOKEN`): again
        while the server restarts or elects a leader, so a judge started then waits it out."""
        await publish_through_outages(self.bus, registration(spec, campaign_id, self.bus.producer))

    async def give_up(self, sealed: ArtifactsSealed, error: Exception) -> None:
        """Record `error` as the infrastructure failure of each sample still owed."""
        raise NotImplementedError

    async def on_given_up(self, event: Event, delivery: Delivery, reason: str) -> None:
        """The bus gave up a sealed run for this judge: its verdicts are owed still, so
        each becomes a JudgmentFailed rather than a silence the campaign waits on."""
        if isinstance(event, ArtifactsSealed):
            error = JudgeGivenUp(
                f"gave up on run {event.run_id} after {delivery.attempt} deliveries: {reason}"
            )
            await self.give_up(event, error)

    async def context_to_fail(self, sealed: ArtifactsSealed) -> RunContext | None:
        """The run's context for recording a failure: as `run_to_judge`, or, where the
        log or store cannot say more, a stand-in carrying the sealed run's own ids."""
        try:
            return await self.run_to_judge(sealed)
        except Exception:
            unknown = Task(task_id=sealed.task_id or "unknown", prompt="(unread)")
            return RunContext(sealed, unknown, default_rubric(), None, RunHistory())

    async def run_to_judge(self, sealed: ArtifactsSealed) -> RunContext | None:
        """The run to judge, or None for a failed run (never scored) or one out of scope."""
        if sealed.outcome == "failed":
            return None
        campaign = await self.reader.campaign(sealed.campaign_id)
        if not self.accepts(sealed.campaign_id, campaign):
            return None
        return await self.reader.context(sealed, campaign)

    def envelope(
        self,
        kind: type[JudgmentRecorded | JudgmentFailed],
        ctx: RunContext,
        judge_id: str,
        sample: int,
    ) -> VerdictEnvelope:
        """Id and envelope of one judge's verdict (`kind`) on one sample of the run."""
        return verdict_envelope(kind, ctx.sealed, ctx.task, judge_id, sample, self.bus.producer)

    async def publish_failed(
        self,
        ctx: RunContext,
        judge_id: str,
        sample: int,
        info: ErrorInfo | Exception,
        *,
        error: str | None = None,
        attempts: int,
        raw_output: FileRef | None = None,
        infrastructure: bool = False,
    ) -> None:
        """Publish that one judge gave no verdict on one sample of the run, and why (an
        exception or its ErrorInfo); `error` is the flat text (default: `info`'s)."""
        info = info if isinstance(info, ErrorInfo) else ErrorInfo.of(info)
        failed = JudgmentFailed(
            **self.envelope(JudgmentFailed, ctx, judge_id, sample),
            error=info.text if error is None else error,
            error_info=info,
            attempts=attempts,
            raw_output=raw_output,
            infrastructure=infrastructure,
        )
        await self.bus.publish(failed)
