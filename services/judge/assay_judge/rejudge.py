"""`assay rejudge`: have a new or changed judge judge historic sealed runs, no agent rerun.

The judge service keeps one durable consumer per judge id with deliver-all over
``ArtifactsSealed``, so a judge started now back-fills every sealed run in the log.
Rejudging is therefore: start that judge service in the foreground for the campaign
(it records ``JudgeRegistered`` itself), and stop it once every
run sealed in the campaign has a verdict (or a recorded failure) from it for each of its
samples. The report then shows the new judge beside the old ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NamedTuple, Protocol

from assay.bus import Bus
from assay.config import Settings
from assay.service import Service
from assay_schemas import ArtifactsSealed, JudgeSpec, JudgmentFailed, JudgmentRecorded, RunHistory

from .context import ALL_CAMPAIGNS, CampaignScope
from .service import build

__all__ = ["JudgeBuilder", "RejudgeResult", "rejudge"]


class JudgeBuilder(Protocol):
    """Builds the judge service for a scope (`service.build`; tests pass a stand-in)."""

    def __call__(
        self, settings: Settings, judge: JudgeSpec, *, campaigns: CampaignScope
    ) -> Service: ...


class RejudgeResult(NamedTuple):
    """How far the judge got."""

    judge_id: str
    campaigns: list[str]
    n_sealed: int
    n_done: int
    """Sealed runs with a verdict or a recorded failure for every sample."""
    n_failed: int
    """Judgments recorded as JudgmentFailed."""
    complete: bool


async def _sealed(bus: Bus, campaign: str | None) -> dict[str, str]:
    """run_id → campaign of every sealed run now in the log."""
    subject = bus.subjects.event("ArtifactsSealed", campaign or "*", "*")
    return {
        item.event.run_id or "": item.event.campaign_id
        async for item in bus.replay(subject=subject)
        if isinstance(item.event, ArtifactsSealed)
    }


class _Progress:
    """The histories of the campaign's runs as far as judging goes, read incrementally."""

    def __init__(self, bus: Bus, judge_id: str, campaign: str | None) -> None:
        self.bus, self.judge_id = bus, judge_id
        self.cursors = {
            t: 1 for t in (JudgmentRecorded.__name__, JudgmentFailed.__name__)
        }  # event type → next sequence to read
        self.campaign = campaign or "*"
        self.runs: dict[str, RunHistory] = {}

    async def poll(self) -> None:
        for kind, start in self.cursors.items():
            subject = self.bus.subjects.event(kind, self.campaign, "*")
            async for item in self.bus.replay(start=start, subject=subject):
                self.cursors[kind] = item.sequence + 1
                self.runs.setdefault(item.event.run_id or "", RunHistory()).apply(item.event)

    def done(self, runs: dict[str, str], samples: int) -> int:
        """Runs with a verdict or a recorded failure from the judge for every sample."""
        empty = RunHistory()
        return sum(
            1 for r in runs if len(self.runs.get(r, empty).samples_done(self.judge_id)) >= samples
        )

    @property
    def failed(self) -> int:
        """Judgments of the judge recorded as JudgmentFailed."""
        return sum(
            key.judge_id == self.judge_id
            for history in self.runs.values()
            for key in history.judgment_failures
        )


async def rejudge(
    settings: Settings,
    judge: JudgeSpec,
    *,
    campaign: str | None = None,
    build_judge: JudgeBuilder = build,
    timeout_s: float | None = None,
    poll_s: float = 1.0,
    on_progress: Callable[[int, int], None] | None = None,
) -> RejudgeResult:
    """Run ``judge`` over every sealed run of ``campaign`` (all campaigns when None).

    The judge service registers the judge (JudgeRegistered) for the campaign itself.
    A changed judge needs a new judge id: verdicts already on the log under an id count
    as done, and that id's durable consumer has already delivered the old runs.
    """
    async with Bus(settings, service="rejudge") as bus:
        runs = await _sealed(bus, campaign)
        campaigns = sorted({campaign} if campaign else set(runs.values()))
        service = build_judge(settings, judge, campaigns={campaign} if campaign else ALL_CAMPAIGNS)
        progress = _Progress(bus, judge.judge_id, campaign)
        await service.start()
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        try:
            while True:
                await progress.poll()
                done = progress.done(runs, judge.sampling_times)
                if on_progress is not None:
                    on_progress(done, len(runs))
                if done >= len(runs) or (deadline is not None and loop.time() > deadline):
                    break
                await asyncio.sleep(poll_s)
        finally:
            await service.stop()
    return RejudgeResult(
        judge_id=judge.judge_id,
        campaigns=campaigns,
        n_sealed=len(runs),
        n_done=done,
        n_failed=progress.failed,
        complete=done >= len(runs),
    )
