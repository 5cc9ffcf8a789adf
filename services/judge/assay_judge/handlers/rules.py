"""The rule judge's handler: deterministic checks on every sealed run, recorded as judge `rules`."""

from __future__ import annotations

import asyncio
import fnmatch
from dataclasses import dataclass, field

from assay.bus import Delivery
from assay_schemas import (
    RULES_JUDGE_ID,
    ArtifactsSealed,
    CampaignSpec,
    ErrorInfo,
    FileRef,
    JudgeSpec,
    JudgmentRecorded,
    StoreError,
    Task,
)

from ..answer import final_answer
from ..context import ALL_CAMPAIGNS, JURY_TOKEN, RunContext, SealedRunJudge
from ..files import normalize_path
from ..rules.checks import RuleVerdict, evaluate
from ..rules.injection import SCAN_CHARS
from ..rules.worker import CheckFailed, Evaluator, RuleWorkers

__all__ = ["RULES_SPEC", "RulesService"]


RULES_SPEC = JudgeSpec(judge_id=RULES_JUDGE_ID, model="rules-v1", family="rules", provider="openai")
"""How the rule judge registers: no model is ever called."""

_FETCH_CAP = 5_000_000
"""Produced files larger than this are not scanned for claims or injections."""


def _wanted(ref: FileRef, task: Task, produced: bool) -> bool:
    """Files whose bytes the rules need: produced text-like files, and reference targets."""
    targets = any(
        fnmatch.fnmatchcase(ref.path, normalize_path(c.path)) for c in task.reference_checks
    )
    scan = (
        produced and ref.size <= _FETCH_CAP and not ref.media_type.startswith(("image/", "video/"))
    )
    return targets or scan


@dataclass(kw_only=True)
class RulesService(SealedRunJudge):
    """The deterministic rule judge over every sealed run in its scope (default: all).

    The checks run in worker processes (`RuleWorkers`), each check within
    `check_budget_s`; `evaluator` is swappable for tests of that machinery."""

    check_budget_s: float = 5.0
    evaluator: Evaluator = evaluate
    workers: RuleWorkers = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.workers = RuleWorkers(self.check_budget_s)

    def accepts(self, campaign_id: str, campaign: CampaignSpec | None) -> bool:
        """Whether runs of this campaign are checked: with no scope (None) or
        ALL_CAMPAIGNS every campaign's, with a set only those campaigns'."""
        return self.campaigns in (None, ALL_CAMPAIGNS) or campaign_id in (self.campaigns or ())

    async def stop(self) -> None:
        """Kill running checks, then stop consuming (their messages are redelivered)."""
        self.workers.close()
        await self.bus.stop()

    async def register(self) -> None:
        """Publish the rule judge's JudgeRegistered."""
        await self.announce(RULES_SPEC, JURY_TOKEN)

    async def on_sealed(self, event: ArtifactsSealed, delivery: Delivery) -> None:
        """Check one sealed run and record the result (once)."""
        ctx = await self.run_to_judge(event)
        if ctx is None or 0 in ctx.history.samples_done(RULES_JUDGE_ID):
            return
        attached = {(a.path, a.sha256) for a in ctx.task.attachments}
        contents: dict[str, bytes] = {}
        sealed = ctx.sealed  # the manifest inline, however it was published
        for ref in sealed.files:
            if _wanted(ref, ctx.task, (ref.path, ref.sha256) not in attached):
                contents[ref.path] = await asyncio.to_thread(self.store.get_bytes, ref.sha256)
        try:
            answer = await final_answer(sealed, self.store, SCAN_CHARS)
        except StoreError as e:  # the platform lost the answer: never judge only its start
            info = ErrorInfo(
                error_class=type(e).__name__, message=f"the final answer cannot be read: {e}"
            )
            await self.publish_failed(
                ctx, RULES_JUDGE_ID, 0, info, error=info.message, attempts=1, infrastructure=True
            )
            return
        try:
            verdict = await self.workers.run(
                self.evaluator,
                task=ctx.task,
                files=sealed.files,
                contents=contents,
                final_message=answer,
                steps=ctx.history.steps,
            )
        except CheckFailed as e:  # a check that raises or runs out is final: never retried
            error = f"rule check failed: {e}"
            await self.publish_failed(ctx, RULES_JUDGE_ID, 0, e, error=error, attempts=1)
            return
        await self._record(ctx, verdict)

    async def give_up(self, sealed: ArtifactsSealed, error: Exception) -> None:
        """Record `error` as the infrastructure failure of the run's one rule verdict."""
        ctx = await self.context_to_fail(sealed)
        if ctx is None or 0 in ctx.history.samples_done(RULES_JUDGE_ID):
            return
        tries = self.bus.settings.max_deliver
        await self.publish_failed(
            ctx, RULES_JUDGE_ID, 0, error, attempts=tries, infrastructure=True
        )

    async def _record(self, ctx: RunContext, verdict: RuleVerdict) -> None:
        failed = [c for c in verdict.checks if not c.passed]
        rationale = (
            "; ".join(f"{c.name}: {c.detail}" for c in failed)
            if failed
            else f"all {len(verdict.checks)} checks passed"
        )
        recorded = JudgmentRecorded(
            **self.envelope(JudgmentRecorded, ctx, RULES_JUDGE_ID, 0),
            judge_family=RULES_SPEC.family,
            judge_model=RULES_SPEC.model,
            rubric_id=ctx.rubric.rubric_id,
            rubric_version=ctx.rubric.version,
            failure_tags=verdict.failure_tags,
            rationale=rationale,
            files_opened=verdict.files_read,
            checks=verdict.checks,
        )
        await self.bus.publish(recorded)
