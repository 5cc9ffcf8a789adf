"""A judge's back-fill: every sealed run already on the log of a campaign it is enabled for.

The judge's durable consumer (deliver-all) sees every seal once, but a seal it saw while
not enabled for that campaign was settled then; enabling a judge later (``--campaign``,
or every campaign) must still judge those runs. So at start a judge reads the log for the
sealed runs it owes, judges those without its verdict, and says how far it got. It reads
what is done from the log each time, so a judge restarted with the same id resumes where
it stopped, and a run the durable hands it meanwhile is judged once (one lock per run).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import NamedTuple, Protocol

from assay.bus import Bus
from assay.lifecycle import stop_if_cancelled
from assay_schemas import (
    ArtifactsSealed,
    CampaignSpec,
    JudgmentFailed,
    JudgmentRecorded,
    RunRequested,
    samples_owed,
)

__all__ = [
    "Backfill",
    "BackfillTarget",
    "ProgressSink",
    "log_progress",
    "owed_runs",
    "run_backfill",
]

log = logging.getLogger("assay.judge.backfill")

ProgressSink = Callable[[int, int, int], None]
"""Called with (runs judged, runs owed, runs already judged when the back-fill began)."""


class BackfillTarget(Protocol):
    """The judge a back-fill works for (`JudgeService`)."""

    bus: Bus

    @property
    def judge_id(self) -> str: ...

    @property
    def samples(self) -> int: ...

    async def campaign(self, campaign_id: str) -> CampaignSpec | None: ...

    def accepts(self, campaign_id: str, campaign: CampaignSpec | None) -> bool: ...

    async def judge_sealed(self, sealed: ArtifactsSealed) -> None: ...

    async def give_up(self, sealed: ArtifactsSealed, error: Exception) -> None: ...


class Backfill(NamedTuple):
    """The sealed runs a judge owes, as the log stood when it started."""

    todo: list[ArtifactsSealed]
    """Runs without the judge's verdict (or JudgmentFailed) for some sample."""
    judged: list[ArtifactsSealed]
    """Runs with one for each sample (the judge's, or the task's when it asks for more)."""


def log_progress(judge_id: str) -> ProgressSink:
    """The default sink: one log line per step."""

    def sink(done: int, total: int, already: int) -> None:
        log.info(
            "judge %s: %d of %d runs judged (%d already judged)", judge_id, done, total, already
        )

    return sink


async def owed_runs(judge: BackfillTarget) -> Backfill:
    """Sealed runs (not failed) of the campaigns the judge is enabled for, in log order."""
    bus = judge.bus
    runs: dict[str, ArtifactsSealed] = {}
    async for item in bus.replay(subject=bus.subjects.event("ArtifactsSealed")):
        sealed = item.event
        if isinstance(sealed, ArtifactsSealed) and sealed.run_id and sealed.outcome != "failed":
            runs[sealed.run_id] = sealed  # a later seal of the run replaces an earlier one
    enabled: dict[str, bool] = {}  # by campaign: one read of each campaign's declaration
    for campaign_id in sorted({s.campaign_id for s in runs.values()}):
        enabled[campaign_id] = judge.accepts(campaign_id, await judge.campaign(campaign_id))
    owed = [s for s in runs.values() if enabled[s.campaign_id]]
    samples: dict[str, set[int]] = {}
    for kind in (JudgmentRecorded, JudgmentFailed):
        async for item in bus.replay(subject=bus.subjects.event(kind.__name__)):
            e = item.event
            if isinstance(e, JudgmentRecorded | JudgmentFailed) and e.judge_id == judge.judge_id:
                samples.setdefault(e.run_id or "", set()).add(e.sample)

    asked: dict[str, int] = {}  # a task may ask for more samples than the judge's spec
    async for item in bus.replay(subject=bus.subjects.event(RunRequested.__name__)):
        e = item.event
        if isinstance(e, RunRequested) and e.run_id:
            asked[e.run_id] = e.task.judge.sampling_times

    def judged(s: ArtifactsSealed) -> bool:
        run = s.run_id or ""
        return len(samples.get(run, ())) >= samples_owed(judge.samples, asked.get(run, 1))

    return Backfill([s for s in owed if not judged(s)], [s for s in owed if judged(s)])


async def run_backfill(
    judge: BackfillTarget,
    *,
    attempts: int,
    concurrency: int,
    on_progress: ProgressSink,
    retry_s: float = 1.0,
) -> int:
    """Judge every owed run that lacks the judge's verdict; the number of runs owed.

    A run that keeps failing is tried `attempts` times (as the durable would deliver it),
    then recorded as JudgmentFailed: a back-fill never leaves a run silently unjudged.
    """
    plan = await owed_runs(judge)
    already = len(plan.judged)
    total, done = already + len(plan.todo), already
    on_progress(done, total, already)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(sealed: ArtifactsSealed) -> None:
        nonlocal done
        async with gate:
            await _with_retries(judge, sealed, attempts, retry_s)
        done += 1
        on_progress(done, total, already)

    await asyncio.gather(*(one(s) for s in plan.todo))
    return total


async def _with_retries(
    judge: BackfillTarget, sealed: ArtifactsSealed, attempts: int, retry_s: float
) -> None:
    for attempt in range(1, attempts + 1):
        try:
            await judge.judge_sealed(sealed)
            return
        except Exception as e:  # one run's trouble must not stop the back-fill
            stop_if_cancelled(e)  # the judge stops: not the run's trouble
            if attempt >= attempts:
                log.error("judge %s: giving up on run %s: %s", judge.judge_id, sealed.run_id, e)
                await judge.give_up(sealed, e)
                return
            log.warning(
                "judge %s: attempt %d on run %s: %s", judge.judge_id, attempt, sealed.run_id, e
            )
            await asyncio.sleep(retry_s * attempt)
