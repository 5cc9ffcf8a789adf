"""The runner's waves (#51): a campaign with ``stopping:`` is requested a wave of tasks at
a time (`assay_runner.waves` decides which), and once the log holds `CampaignStopped`
its runs never requested are cancelled (`RunCancelled`); a requested run is never
cancelled, it finishes.

Everything is read back from the log: a pacer folds its campaign's events into a
`CampaignHistory` and acts on what the fold says, so a runner that crashed between the
decision and the cancellations finds the stop on the log when it starts again
(`resume`) and cancels what is left; every event it writes has an id derived from the
run, so doing it twice writes nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from assay.bus import Delivery, Unchanged, read_campaign
from assay_schemas import (
    CampaignHistory,
    CampaignSpec,
    CampaignStarted,
    CampaignStopped,
    LogChanged,
    RunCancelled,
    RunRequested,
    TaskAccepted,
    TaskRejected,
    TaskSubmitted,
)

from ..scheduler import ControlsUnopened, control_agents, control_runs, interleave, plan_runs
from ..waves import tasks_due, to_cancel
from .door import Door

__all__ = ["Waves"]

log = logging.getLogger("assay.runner")


@dataclass
class _Paced:
    """What a pacer has read of its campaign's log."""

    history: CampaignHistory
    last_sequence: int = 0
    accepted: dict[str, str] = field(default_factory=dict)
    """task id → the event id of the submission accepted for it."""
    requested_order: dict[str, None] = field(default_factory=dict)
    """Task ids in the order the log holds their first run request (an ordered set)."""
    unanswered: dict[str, float] = field(default_factory=dict)
    """Submission event id → when this pacer first read it (the loop's clock), until its
    answer is read."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def admitting(self, now: float) -> bool:
        """Whether a submission read in the last `ADMISSION_HOLD_S` awaits its answer."""
        return any(now - seen < ADMISSION_HOLD_S for seen in self.unanswered.values())


ADMISSION_HOLD_S = 10.0
"""How long a pacer holds its requests for a submission still being admitted. Tasks run in
the seeded order of those known: a wave chosen among the first accepted of a batch would
be its first submitted (a suite listed easy-first, run easy-first). Bounded, so that a
submission never answered (its admission failing) holds nothing for long."""


@dataclass(kw_only=True)
class Waves(Door):
    """Requests wave campaigns' tasks wave by wave, and cancels what a stop leaves."""

    pace_interval_s: float = 0.5
    """How often a pacer reads its campaign's log while a wave runs."""
    _paced: dict[str, _Paced] = field(default_factory=dict)
    _pacers: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _poked: set[str] = field(default_factory=set)
    """Campaigns whose running pacer was asked to pace again: a task accepted while the
    pacer looked may be missing from what it read, so it must not end on that look."""

    def pace(self, campaign: CampaignSpec) -> None:
        """Start the campaign's pacer unless one is running (then it looks once more)."""
        running = self._pacers.get(campaign.campaign_id)
        if running is None or running.done():
            task = asyncio.create_task(self._pace_loop(campaign))
            self._pacers[campaign.campaign_id] = task
        else:
            self._poked.add(campaign.campaign_id)

    async def resume(self) -> None:
        """Start a pacer for every wave campaign on the log (a restart: each one that has
        nothing left to request or cancel ends at its first look)."""
        subject = self.bus.subjects.event("CampaignStarted", "*", "-")
        async for logged in self.bus.replay(subject=subject):
            e = logged.event
            if isinstance(e, CampaignStarted) and e.campaign.stopping is not None:
                self.pace(e.campaign)

    async def stop_pacers(self) -> None:
        """Stop every pacer (the service is stopping)."""
        for task in self._pacers.values():
            task.cancel()
        for task in self._pacers.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._pacers.clear()

    async def on_campaign_stopped(self, event: CampaignStopped, delivery: Delivery) -> None:
        """Cancel the stopped campaign's runs never requested (acked once they are logged)."""
        campaign = await read_campaign(self.bus, event.campaign_id)
        if campaign is None or campaign.stopping is None:
            return
        await self.pace_once(campaign)

    async def _pace_loop(self, campaign: CampaignSpec) -> None:
        cid = campaign.campaign_id
        while True:
            self._poked.discard(cid)
            try:
                # Done only if no task was accepted since this look began (no await
                # between the check and the return, so no `pace` call slips in).
                if await self.pace_once(campaign) and cid not in self._poked:
                    return
            except Exception:  # the next look retries; a pacer must outlive a hiccup
                log.exception("campaign %s: pacing its waves failed", campaign.campaign_id)
            await asyncio.sleep(self.pace_interval_s)

    async def pace_once(self, campaign: CampaignSpec) -> bool:
        """Read the campaign's new events; request the tasks due, or cancel what a stop
        left. True when nothing is left to do (every accepted task requested, or the
        campaign stopped and its unrequested runs cancelled)."""
        cid = campaign.campaign_id
        paced = self._paced.setdefault(cid, _Paced(CampaignHistory(campaign_id=cid)))
        async with paced.lock:
            await self._read(paced)
            history = paced.history
            if history.stopped:
                await self._cancel(campaign, paced)
                return True
            if paced.admitting(asyncio.get_running_loop().time()):
                return False  # its answer pokes this pacer (`pace`), or the next look
            due = tasks_due(campaign, history, paced.accepted, list(paced.requested_order))
            for task_id in due:
                await self._request_task(campaign, paced, task_id)
            key = f"{cid}/"
            requested = {history.run_task.get(r, "") for r in history.requested}
            waiting = [t for t in paced.accepted if key + t not in requested and t not in due]
            return not waiting

    async def _read(self, paced: _Paced) -> None:
        subject = self.bus.subjects.event("*", paced.history.campaign_id or "-", "*")
        async for logged in self.bus.replay(start=paced.last_sequence + 1, subject=subject):
            paced.last_sequence = logged.sequence
            e = logged.event
            if isinstance(e, TaskSubmitted):
                paced.unanswered.setdefault(e.event_id, asyncio.get_running_loop().time())
            elif isinstance(e, TaskAccepted | TaskRejected) and e.submission:
                paced.unanswered.pop(e.submission, None)
            elif isinstance(e, RunRequested) and e.task.task_id:
                paced.requested_order.setdefault(e.task.task_id, None)
            if isinstance(e, TaskAccepted) and e.task_id:
                paced.accepted.setdefault(e.task_id, e.submission)
            paced.history.apply(e)

    async def _planned(
        self, campaign: CampaignSpec, paced: _Paced, task_id: str
    ) -> list[RunRequested]:
        """The task's runs as the door planned them when it accepted it (ids derive from
        the plan, so planning again gives the same runs)."""
        task = paced.history.tasks.get(f"{campaign.campaign_id}/{task_id}")
        cause = paced.accepted.get(task_id, "")
        if task is None:
            return []
        declared = await self._controls_of(campaign.campaign_id)
        try:
            skip = control_agents(campaign, declared)
        except ControlsUnopened as e:
            log.error("task %s: no run requested: %s", task_id, e)
            return []
        runs = plan_runs(
            campaign,
            task,
            producer=self.bus.producer,
            cause=cause,
            gateway_root=self.gateway_root,
            control_agents=skip,
        )
        controls = control_runs(campaign, task, declared, producer=self.bus.producer, cause=cause)
        return interleave(runs, controls)

    async def _request_task(self, campaign: CampaignSpec, paced: _Paced, task_id: str) -> None:
        taken = await self._schedule(await self._planned(campaign, paced, task_id))
        if taken is not None:
            log.warning("task %s: a run of it was requested for another task", task_id)

    async def _cancel(self, campaign: CampaignSpec, paced: _Paced) -> None:
        stop = CampaignStopped.id_for(campaign.campaign_id)
        for task_id, left in to_cancel(campaign, paced.history, paced.accepted).items():
            for run in await self._planned(campaign, paced, task_id):
                if run.run_id in left:
                    await self.cancel_run(run, cause=stop)
        log.info("campaign %s stopped: runs never requested cancelled", campaign.campaign_id)

    async def cancel_run(self, run: RunRequested, *, cause: str) -> bool:
        """Log that `run` was never requested and never will be; False when its subjects
        are no longer empty: another pacer requested it (it runs, and finishes) or
        cancelled it first. Conditioned like the request (`Door._request`), so of a
        request and a cancellation decided on the same reads only the first is logged."""
        rid = run.run_id or ""
        try:
            await self.bus.publish(
                RunCancelled(
                    event_id=RunCancelled.id_for(rid),
                    campaign_id=run.campaign_id,
                    run_id=rid,
                    task_id=run.task_id,
                    causation_id=cause,
                    agent_id=run.agent.agent_id,
                    epoch=run.epoch,
                    producer=self.bus.producer,
                ),
                unchanged=Unchanged(self.bus.subjects.run(run.campaign_id, rid), 0),
            )
        except LogChanged:
            log.info("run %s: requested or cancelled before this cancellation", rid)
            return False
        return True
