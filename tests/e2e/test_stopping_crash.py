"""A crash between a stop's decision and its cancellations recovers from the log (#51).

On a real nats-server, with the real aggregator and runner, each its own process at first
(`assay serve`; the runner killed with SIGKILL): the log comes to hold what decides the stop
while no aggregator runs (as when one dies between folding the deciding event and
publishing `CampaignStopped`); an aggregator that starts publishes the decision once; the
runner is SIGKILLed as soon as its first `RunCancelled` is logged, mid-way through the
cancellations; a runner that starts again cancels every planned run left, each once, and
every run ends exactly once (`assay check` clean, `replay --verify` identical).

The runs' workers are played as in `test_stopping` (planted scores), here only for the
first tasks at first, so that the campaign has runs in flight and runs never requested
when it stops.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_aggregator.invariants import check_log
from assay_aggregator.verify import ReportParams, verify
from assay_schemas import (
    CampaignSpec,
    CampaignStopped,
    Event,
    JudgmentRecorded,
    RunCancelled,
    RunHistory,
    RunRequested,
)
from assay_testing.pipeline import service_process
from tests.e2e.test_stopping import (
    N_TASKS,
    _aggregator_and_runner,
    _campaign,
    _log,
    _planned,
    _submit,
    _until,
    _workers,
)

DUPLICATE_WINDOW_S = 1.0
EPOCHS = 4
"""Runs per agent and task: more cancellations, so the kill lands among them."""
WORKED_TASKS = 16
"""Tasks the workers answer before the stop: planted 9 vs 2 settles at 13 tasks (waves
of 4, so at the wave of 16); the runner has requested two waves beyond them by then."""


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The test's settings with a one-second duplicate window: the stream cannot drop a
    second `RunCancelled` or `CampaignStopped` of a restarted service as a duplicate, so
    "once" is what the services read from the log, not what the broker filtered."""
    return settings.model_copy(update={"duplicate_window_s": DUPLICATE_WINDOW_S})


def _campaign_of(campaign_id: str) -> CampaignSpec:
    return _campaign(campaign_id).model_copy(update={"epochs": EPOCHS})


def _count(kind: type[Event], n: Callable[[int], bool]):  # type: ignore[no-untyped-def]
    return lambda log: n(sum(isinstance(e, kind) for _, e in log))


async def _kill_at_first_cancellation(bus: Bus, pid: int) -> None:
    """SIGKILL the runner's process group the moment its first `RunCancelled` is logged."""
    subject = bus.subjects.event("RunCancelled")
    async for logged in bus.replay(subject=subject, follow=True):
        if isinstance(logged.event, RunCancelled):
            os.killpg(pid, signal.SIGKILL)
            return


async def test_a_crash_between_the_stop_and_its_cancellations_recovers_from_the_log(
    bus: Bus, settings: Settings
) -> None:
    campaign = _campaign_of("crashstop")
    planned = _planned(campaign)
    per_task = len(campaign.agents) * EPOCHS
    store = LocalBlobStore(settings.blob_dir)

    # 1. The runner (its own process) paces the waves; the workers answer the first
    # tasks; no aggregator runs, so the deciding wave is logged and no stop is.
    async with service_process("runner", settings) as runner:
        async with _workers(settings, tasks=WORKED_TASKS):
            await _submit(bus, campaign)
            judged = WORKED_TASKS * per_task * 2  # the rules' verdict and judge-a's
            await _until(bus, _count(JudgmentRecorded, lambda n: n == judged), timeout=120)
            # Two waves beyond the last complete one are requested, and wait.
            requested = (WORKED_TASKS + 2 * 4) * per_task
            await _until(bus, _count(RunRequested, lambda n: n == requested), timeout=60)
        assert not [e for _, e in await _log(bus) if isinstance(e, CampaignStopped)]

        # 2. An aggregator starts (the one that died before publishing its decision), in
        # its own process, so that this one only watches: it catches up, decides and
        # publishes the stop; the runner starts cancelling and is SIGKILLed at its first
        # cancellation.
        killer = asyncio.create_task(_kill_at_first_cancellation(bus, runner.pid))
        async with service_process("aggregator", settings):
            await asyncio.wait_for(killer, 120)
            assert await asyncio.wait_for(runner.wait(), 10) == -signal.SIGKILL

    log = await _log(bus)
    left = planned - {e.run_id for _, e in log if isinstance(e, RunRequested)}
    cancelled = {e.run_id for _, e in log if isinstance(e, RunCancelled)}
    assert len(left) == (N_TASKS - WORKED_TASKS - 8) * per_task
    assert 0 < len(cancelled) < len(left), "the kill must land mid-way through the cancellations"

    # 3. Both start again, past the duplicate window; the workers finish the runs in flight.
    await asyncio.sleep(2 * DUPLICATE_WINDOW_S)

    def done(log: list[tuple[int, Event]]) -> bool:
        ended = {e.run_id for _, e in log if isinstance(e, (RunCancelled, JudgmentRecorded))}
        return planned <= ended and sum(isinstance(e, JudgmentRecorded) for _, e in log) == (
            2 * (len(planned) - len(left))
        )

    async with _aggregator_and_runner(settings, store), _workers(settings):
        log = await _until(bus, done, timeout=120)

    events = [e for _, e in log]
    stops = [e for e in events if isinstance(e, CampaignStopped)]
    cancellations = [e.run_id for e in events if isinstance(e, RunCancelled)]
    assert len(stops) == 1 and stops[0].settled and stops[0].leader == "strong"
    # Every planned run never requested is cancelled exactly once; no other run is.
    assert sorted(cancellations) == sorted(left)
    for rid in planned:
        history = RunHistory.fold(e for e in events if e.run_id == rid)
        assert history.ended is not None and not history.refused, rid
    _, breaches = check_log(log)
    assert breaches == []
    results = await verify(settings, ReportParams(n_resamples=50))
    assert [r.name for r in results if not r.identical] == []
