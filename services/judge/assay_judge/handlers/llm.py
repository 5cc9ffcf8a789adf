"""Judge handlers: a sealed run in, `JudgmentRecorded` / `JudgmentFailed` out.

Idempotent by construction: a judgment's event id is derived from (run, judge, sample),
and samples already on the log are skipped before any model is called, so a redelivery
after a crash neither duplicates a judgment nor pays for it twice. A run is settled only
with a verdict or a `JudgmentFailed` for each sample: one that keeps failing is recorded
as failed on its last delivery, never dead-lettered unjudged.

A judge is enabled for a campaign that names it, for one its scope covers (`--campaign`,
or every campaign), and for one it registered for before (its `JudgeRegistered` for that
campaign on the log), so a restart keeps what an earlier start enabled. At start it
back-fills the sealed runs it owes (`backfill`), beside its durable consumer.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from assay.bus import Delivery
from assay.lifecycle import cancelled_meanwhile
from assay.providers import (
    DEFAULT_PRICES,
    DevCached,
    ModelCache,
    ModelProvider,
    PriceTable,
    ProviderError,
    cost,
    pinned_prices,
    provider_for,
)
from assay_schemas import (
    ArtifactsSealed,
    CampaignSpec,
    ErrorInfo,
    FileRef,
    JudgeRegistered,
    JudgeSpec,
    JudgmentRecorded,
    StoreError,
    Task,
    samples_owed,
)

from ..answer import final_answer
from ..backfill import ProgressSink, log_progress, run_backfill
from ..context import ALL_CAMPAIGNS, JURY_TOKEN, RunContext, SealedRunJudge
from ..files import SealedFiles
from ..killable import Killable
from ..llm.agent import JudgeOutcome, judge_sample
from ..llm.prompts import FINAL_MESSAGE_CHARS

__all__ = ["JudgeService", "ProviderFactory", "sampling_times"]

log = logging.getLogger("assay.judge")

ProviderFactory = Callable[[JudgeSpec], ModelProvider]


def sampling_times(spec: JudgeSpec, task: Task) -> int:
    """Samples this judge owes a run of `task` (`assay_schemas.samples_owed`)."""
    return samples_owed(spec.sampling_times, task.judge.sampling_times)


@dataclass(kw_only=True)
class JudgeService(SealedRunJudge):
    """One LLM judge: judges every sealed run in its scope, once per sample."""

    spec: JudgeSpec
    providers: ProviderFactory = provider_for
    prices: PriceTable = field(default_factory=lambda: dict(DEFAULT_PRICES))
    _provider: ModelProvider | None = None
    _registered: set[str] = field(default_factory=set)
    processes: Killable = field(default_factory=Killable)
    """Where this judge's tools parse documents; killed on stop."""
    on_progress: ProgressSink | None = None
    """Told how far the back-fill got (default: a log line per run)."""
    _enabled: set[str] = field(default_factory=set)
    """Campaigns this judge registered for on the log (by any earlier start)."""
    _runs: dict[str, asyncio.Lock] = field(default_factory=dict)
    _backfill: asyncio.Task[int] | None = None
    model_cache_dir: Path | None = None
    """Where the development cache keeps answers (``<home>/cache/models``, shared with the
    runners), for campaigns that say ``cache:``; None: such campaigns' judges ask."""

    @property
    def judge_id(self) -> str:
        """The judge's id."""
        return self.spec.judge_id

    @property
    def samples(self) -> int:
        """Samples per run the judge's spec asks for (a task may ask for more)."""
        return self.spec.sampling_times

    def accepts(self, campaign_id: str, campaign: CampaignSpec | None) -> bool:
        """Whether this judge is enabled for the campaign: named by it, registered for it
        on the log, or in the scope it was started with."""
        if campaign is not None and any(j.judge_id == self.judge_id for j in campaign.judges):
            return True
        if campaign_id in self._enabled:
            return True
        if self.campaigns is None:
            return False
        return self.campaigns == ALL_CAMPAIGNS or campaign_id in self.campaigns

    async def campaign(self, campaign_id: str) -> CampaignSpec | None:
        """The campaign's spec as the log declares it (None when it does not)."""
        return await self.reader.campaign(campaign_id)

    async def start(self) -> None:
        """Connect, read the campaigns it is enabled for, announce the judge, consume, and
        back-fill the sealed runs it owes in the background."""
        await self.bus.connect()
        await self._read_registrations()
        await self.register()
        await self.bus.start()
        self._backfill = asyncio.create_task(
            run_backfill(
                self,
                attempts=self.bus.settings.max_deliver,
                concurrency=self.spec.max_concurrency,
                on_progress=self.on_progress or log_progress(self.judge_id),
            ),
            name=f"backfill-{self.judge_id}",
        )

    async def backfilled(self) -> int:
        """Wait for the back-fill begun at start; the number of runs it owed."""
        assert self._backfill is not None, "the judge was not started"
        return await self._backfill

    async def _read_registrations(self) -> None:
        subject = self.bus.subjects.event(JudgeRegistered.__name__)
        async for item in self.bus.replay(subject=subject):
            e = item.event
            mine = isinstance(e, JudgeRegistered) and e.judge.judge_id == self.judge_id
            if mine and e.campaign_id != JURY_TOKEN:
                self._enabled.add(e.campaign_id)

    async def register(self, campaign_id: str | None = None) -> None:
        """Publish JudgeRegistered for one campaign, or (on start) for every campaign in scope.

        On start the scope is: the named campaigns, or the campaigns already on the log that
        this judge judges; with none yet, the judge registers under `JURY_TOKEN`, and each
        campaign is registered again when its first run is judged.
        """
        if campaign_id is None:
            if self.campaigns is not None and self.campaigns != ALL_CAMPAIGNS:
                in_scope = sorted(self.campaigns)
            else:
                in_scope = [c for c in await self.reader.campaign_ids() if await self._in_scope(c)]
            for token in in_scope or [JURY_TOKEN]:
                await self.register(token)
            return
        if campaign_id in self._registered:
            return
        await self.announce(self.spec, campaign_id)
        self._registered.add(campaign_id)
        if campaign_id != JURY_TOKEN:
            self._enabled.add(campaign_id)

    async def _in_scope(self, campaign_id: str) -> bool:
        return self.accepts(campaign_id, await self.reader.campaign(campaign_id))

    def provider(self) -> ModelProvider:
        """The judge's model provider, built on first use (so a missing key fails a judgment,
        recorded as an infrastructure failure, instead of the service)."""
        if self._provider is None:
            self._provider = self.providers(self.spec)
        return self._provider

    def sample_provider(self, ctx: RunContext, sample: int) -> ModelProvider:
        """The judge's provider for one sample: behind the development cache when the
        run's campaign says ``cache:``, keyed by the run's epoch and the sample index."""
        provider = self.provider()
        cache = ctx.campaign.cache if ctx.campaign is not None else None
        if cache is None:
            return provider
        if self.model_cache_dir is None:
            campaign = ctx.sealed.campaign_id
            log.warning(
                "judge %s: campaign %s asks for cache: but it has none", self.judge_id, campaign
            )
            return provider
        return DevCached(
            inner=provider,
            cache=ModelCache(self.model_cache_dir, cache.ttl),
            base_url=self.spec.base_url or f"{self.spec.provider} default",
            epoch=ctx.sealed.epoch,
            sample=sample,
        )

    async def stop(self) -> None:
        """Stop the back-fill, kill running parses, stop consuming and release the
        provider's connections."""
        backfill, self._backfill = self._backfill, None
        if backfill is not None:
            backfill.cancel()
        self.processes.close()
        # The bus first, with no await before it: a consumer whose connection is gone
        # spins without yielding until its broker is stopped.
        try:
            await self.bus.stop()
        finally:  # a bus that fails to stop must not leave the provider's session open
            if backfill is not None:
                await asyncio.gather(backfill, return_exceptions=True)
            await self.aclose()

    async def aclose(self) -> None:
        """Release the provider's connections."""
        if self._provider is not None:
            await self._provider.aclose()
            self._provider = None

    async def on_sealed(self, event: ArtifactsSealed, delivery: Delivery) -> None:
        """Judge a sealed run; on its last delivery, a failure is recorded, not dropped."""
        try:
            await self.judge_sealed(event)
        except Exception as e:
            if delivery.attempt < self.bus.settings.max_deliver or cancelled_meanwhile():
                raise  # redelivered with backoff (after a restart, when the judge stops)
            log.error("judge %s gives up on run %s: %s", self.judge_id, event.run_id, e)
            await self.give_up(event, e)

    async def judge_sealed(self, event: ArtifactsSealed) -> None:
        """Judge every sample of the run not yet on the log, concurrently (one at a time
        per run in this process: the back-fill and the durable may both hand it over)."""
        async with self._runs.setdefault(event.run_id or "", asyncio.Lock()):
            ctx = await self.run_to_judge(event)
            if ctx is None:
                return
            done = ctx.history.samples_done(self.judge_id)
            todo = [s for s in range(sampling_times(self.spec, ctx.task)) if s not in done]
            if not todo:
                return
            await self.register(event.campaign_id)
            await asyncio.gather(*(self._judge(ctx, s) for s in todo))

    async def give_up(self, sealed: ArtifactsSealed, error: Exception) -> None:
        """Record `error` as the infrastructure failure of each sample still owed."""
        ctx = await self.context_to_fail(sealed)
        if ctx is None:
            return
        done = ctx.history.samples_done(self.judge_id)
        info, tries = ErrorInfo.of(error), self.bus.settings.max_deliver
        for sample in range(sampling_times(self.spec, ctx.task)):
            if sample not in done:
                await self._failed(ctx, sample, info, tries, None, infrastructure=True)

    async def _judge(self, ctx: RunContext, sample: int) -> None:
        sealed = ctx.sealed
        files = SealedFiles(
            files=list(sealed.files),
            store=self.store,
            attachments={(a.path, a.sha256) for a in ctx.task.attachments},
            sources=ctx.history.sources,
        )
        try:
            answer = await final_answer(sealed, self.store, FINAL_MESSAGE_CHARS)
        except StoreError as e:  # the platform lost the answer: never judge only its start
            lost = ErrorInfo(
                error_class=type(e).__name__, message=f"the final answer cannot be read: {e}"
            )
            await self._failed(ctx, sample, lost, 1, None, infrastructure=True)
            return
        try:
            outcome = await judge_sample(
                campaign_id=sealed.campaign_id,
                spec=self.spec,
                provider=self.sample_provider(ctx, sample),
                task=ctx.task,
                final_message=answer,
                final_message_bytes=blob.size if (blob := sealed.final_message_blob) else None,
                files=files,
                rubric=ctx.rubric,
                sample=sample,
                processes=self.processes,
            )
        except ProviderError as e:
            # The provider already retried; a judge outage is the platform's failure.
            log.warning("judge %s on run %s: %s", self.spec.judge_id, sealed.run_id, e)
            await self._failed(ctx, sample, ErrorInfo.of(e), 1, None, infrastructure=True)
            return
        if outcome.verdict is None:
            raw = await self._store_raw(ctx, sample, outcome)
            error = ErrorInfo(message="no valid verdict: " + "; ".join(outcome.problems))
            await self._failed(
                ctx, sample, error, len(outcome.invalid_outputs), raw, infrastructure=False
            )
            return
        rejected = await self._store_raw(ctx, sample, outcome) if outcome.invalid_outputs else None
        await self._recorded(ctx, sample, outcome, files.opened, rejected)

    def price_table(self, campaign: CampaignSpec | None) -> PriceTable:
        """The configured prices, overridden by the campaign's (as the runner does)."""
        return pinned_prices(self.prices, campaign.prices if campaign else {})

    async def _recorded(
        self,
        ctx: RunContext,
        sample: int,
        outcome: JudgeOutcome,
        opened: list[str],
        rejected: FileRef | None,
    ) -> None:
        verdict = outcome.verdict
        assert verdict is not None
        recorded = JudgmentRecorded(
            **self.envelope(JudgmentRecorded, ctx, self.spec.judge_id, sample),
            judge_family=self.spec.family,
            judge_model=outcome.model or self.spec.model,
            rubric_id=ctx.rubric.rubric_id,
            rubric_version=ctx.rubric.version,
            scores=verdict.scores,
            failure_tags=verdict.failure_tags,
            rationale=verdict.rationale,
            files_cited=verdict.files_cited,
            files_opened=opened,
            usage=outcome.usage,
            cost_usd=cost(outcome.usage, self.spec.model, self.price_table(ctx.campaign)),
            attempts=len(outcome.invalid_outputs) + 1,
            rejected_outputs=rejected,
            cached_answer=outcome.cached,
        )
        await self.bus.publish(recorded)

    async def _store_raw(self, ctx: RunContext, sample: int, outcome: JudgeOutcome) -> FileRef:
        data = json.dumps(
            {"judge_id": self.spec.judge_id, "sample": sample, "attempts": outcome.invalid_outputs},
            indent=2,
        ).encode()
        info = await asyncio.to_thread(self.store.put_bytes, data)
        path = f"judgments/{ctx.sealed.run_id}/{self.spec.judge_id}/{sample}/raw.json"
        return FileRef(path=path, sha256=info.sha256, size=info.size, media_type="application/json")

    async def _failed(
        self,
        ctx: RunContext,
        sample: int,
        error: ErrorInfo,
        attempts: int,
        raw: FileRef | None,
        *,
        infrastructure: bool,
    ) -> None:
        await self.publish_failed(
            ctx,
            self.spec.judge_id,
            sample,
            ErrorInfo(error_class=error.error_class, message=error.message[:4000]),
            error=error.text[:4000],
            attempts=max(1, attempts),
            raw_output=raw,
            infrastructure=infrastructure,
        )
