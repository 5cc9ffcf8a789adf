"""Two runners pacing one stopping campaign (#51): one reads the log before the stop and
requests a run, the other reads the stop and cancels the same run as never requested.
Both decisions were made on reads; JetStream stores only the first on the run's
subjects, so the log never holds a request and a cancellation of one run."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_runner.handlers import RunnerService
from assay_runner.service import build as build_runner
from assay_schemas import RunCancelled, RunRequested
from assay_testing.events import run_requested

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def runners(settings: Settings) -> AsyncIterator[tuple[RunnerService, RunnerService]]:
    """Two runner replicas on one log (connected, consuming nothing)."""
    store = LocalBlobStore(settings.blob_dir)
    pair = (
        build_runner(settings.model_copy(update={"instance": "runner-1"}), store=store),
        build_runner(settings.model_copy(update={"instance": "runner-2"}), store=store),
    )
    for r in pair:
        await r.bus.connect()
    try:
        yield pair
    finally:
        for r in pair:
            await r.bus.stop()


async def _run_events(bus: Bus, run_id: str) -> list[str]:
    return [m.event.event_type async for m in bus.replay() if m.event.run_id == run_id]


async def test_a_run_cancelled_first_is_not_requested_after(
    bus: Bus, runners: tuple[RunnerService, RunnerService]
) -> None:
    pacing, stopping = runners
    run = run_requested("r1")
    assert await stopping.cancel_run(run, cause="stop")
    assert await pacing._schedule([run]) is None  # its pacer read the log before the stop
    assert await _run_events(bus, "r1") == ["RunCancelled"]


async def test_a_run_requested_first_is_not_cancelled_after(
    bus: Bus, runners: tuple[RunnerService, RunnerService]
) -> None:
    pacing, stopping = runners
    run = run_requested("r1")
    assert await pacing._schedule([run]) is None
    assert not await stopping.cancel_run(run, cause="stop")  # read before the request
    assert await _run_events(bus, "r1") == ["RunRequested"]


async def test_cancelling_twice_logs_one_cancellation(
    bus: Bus, runners: tuple[RunnerService, RunnerService]
) -> None:
    """A redelivered stop, or both replicas cancelling: one event (one id, one subject)."""
    run = run_requested("r1")
    assert await runners[0].cancel_run(run, cause="stop")
    assert not await runners[1].cancel_run(run, cause="stop")
    events = [m.event async for m in bus.replay()]
    assert [type(e) for e in events] == [RunCancelled]
    assert not any(isinstance(e, RunRequested) for e in events)
