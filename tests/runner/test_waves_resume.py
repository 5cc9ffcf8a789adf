"""A wave campaign's pacer, started by a runner's `resume`, looks while the door accepts
the campaign's tasks (#52: with its admissions 64 at once, a runner that came up after a
campaign was submitted accepted all 40 tasks during its pacer's first look, and that look,
having read none of them, ended the pacer: 40 tasks accepted, no run ever requested).

On a real nats-server with the real runner: the campaign is logged before the runner
starts, its tasks only once the pacer's first look has read the log, and that look waits
until the door has accepted every task before it decides, so whatever it decides missed
them all; the first two waves' runs must still be requested."""

from __future__ import annotations

import asyncio
from unittest.mock import patch

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_runner.handlers.door import Door
from assay_runner.handlers.waves import Waves, _Paced
from assay_runner.service import build as build_runner
from assay_runner.waves import task_order
from assay_schemas import (
    AgentSpec,
    CampaignSpec,
    JudgeSpec,
    Producer,
    RunRequested,
    StoppingSpec,
    Task,
    TaskAccepted,
    TaskSubmitted,
)
from assay_testing.events import campaign_started

pytestmark = pytest.mark.timeout(90)

CLI = Producer(service="cli", version="test")
N_TASKS = 12
CHECK_EVERY = 4
"""Waves of 4 tasks: two waves (8 tasks) are requested before any completes."""


def _campaign() -> CampaignSpec:
    return CampaignSpec(
        campaign_id="resumed",
        agents=[
            AgentSpec(agent_id="strong", model="scripted-strong", family="acme"),
            AgentSpec(agent_id="weak", model="scripted-weak", family="acme"),
        ],
        judges=[JudgeSpec(judge_id="judge-a", model="scripted-judge", family="orbit")],
        scripted=True,
        stopping=StoppingSpec(when="ranking_settled", min_tasks_per_agent=10, check_every=4),
    )


async def _count(bus: Bus, kind: type[object]) -> int:
    return sum([isinstance(m.event, kind) async for m in bus.replay()])


async def _submit(bus: Bus, campaign: CampaignSpec, task_id: str, prompt: str) -> None:
    task = Task(task_id=task_id, prompt=prompt)
    await bus.publish(
        TaskSubmitted(
            event_id=TaskSubmitted.id_for(campaign.campaign_id, task_id),
            campaign_id=campaign.campaign_id,
            task_id=task_id,
            task=task,
            producer=CLI,
        )
    )


async def _two_waves_requested(bus: Bus, campaign: CampaignSpec) -> int:
    """Wait until the first two waves' runs are requested; how many that is."""
    wave_runs = 2 * CHECK_EVERY * len(campaign.agents) * campaign.epochs
    deadline = asyncio.get_running_loop().time() + 60
    while (n := await _count(bus, RunRequested)) < wave_runs:
        assert asyncio.get_running_loop().time() < deadline, f"{n} runs requested"
        await asyncio.sleep(0.2)
    return wave_runs


async def test_tasks_accepted_during_a_resumed_pacers_first_look_are_requested(
    bus: Bus, settings: Settings
) -> None:
    campaign = _campaign()
    await bus.publish(campaign_started(campaign, producer=CLI))
    first_read = asyncio.Event()
    real_read = Waves._read

    async def read_then_wait_for_the_accepts(self: Waves, paced: _Paced) -> None:
        await real_read(self, paced)
        if first_read.is_set():
            return
        first_read.set()  # the tasks are submitted now, after what this look read
        while await _count(bus, TaskAccepted) < N_TASKS:
            await asyncio.sleep(0.05)

    runner = build_runner(settings, store=LocalBlobStore(settings.blob_dir))
    with patch.object(Waves, "_read", read_then_wait_for_the_accepts):
        await runner.start()  # resume(): the campaign is on the log, its pacer looks
        try:
            await asyncio.wait_for(first_read.wait(), 30)
            for t in range(N_TASKS):
                await _submit(bus, campaign, f"task_{t:03d}", f"Estimate the value of {t}.")
            wave_runs = await _two_waves_requested(bus, campaign)
        finally:
            await runner.stop()
    assert await _count(bus, TaskAccepted) == N_TASKS
    assert await _count(bus, RunRequested) == wave_runs


async def test_the_first_waves_wait_for_the_submissions_being_admitted(
    bus: Bus, settings: Settings
) -> None:
    """The first waves are the seeded order's first tasks of all the submissions on the
    log, not of those the door had accepted when its first answer poked the pacer (then
    a suite listed easy-first ran easy-first). The seeded order's first task is admitted
    last, a second late: it must be in the first waves all the same."""
    campaign = _campaign()
    tasks = [f"task_{t:03d}" for t in range(N_TASKS)]
    first = task_order(campaign.campaign_id, tasks)[0]
    real_answer = Door._answer

    async def answer_the_first_late(
        self: Door, spec: object, event: TaskSubmitted, st: object
    ) -> None:
        if event.task.task_id == first:
            await asyncio.sleep(1.0)
        await real_answer(self, spec, event, st)  # type: ignore[arg-type]

    runner = build_runner(settings, store=LocalBlobStore(settings.blob_dir))
    with patch.object(Door, "_answer", answer_the_first_late):
        await runner.start()
        try:
            await bus.publish(campaign_started(campaign, producer=CLI))
            for task_id in tasks:
                await _submit(bus, campaign, task_id, f"Estimate {task_id}.")
            await _two_waves_requested(bus, campaign)
            await asyncio.sleep(1.0)  # nothing more is requested: no wave is complete
        finally:
            await runner.stop()
    requested = {
        m.event.task.task_id async for m in bus.replay() if isinstance(m.event, RunRequested)
    }
    assert requested == set(task_order(campaign.campaign_id, tasks)[: 2 * CHECK_EVERY])
