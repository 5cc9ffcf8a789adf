"""SIGKILL of each service mid-campaign, then a restart: nothing lost, nothing twice, same report."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import open_store
from assay_schemas import AgentStepLogged, ArtifactsSealed, Event, JudgmentRecorded

from .harness import (
    JUDGE_ID,
    Baseline,
    Cast,
    ServiceSet,
    aggregator_report,
    campaign_complete,
    check_against_baseline,
    full_report,
    wait_until,
)

pytestmark = pytest.mark.timeout(240)


def _step(n: int) -> Callable[[list[Event]], bool]:
    return lambda evs: any(isinstance(e, AgentStepLogged) and e.step >= n for e in evs)


def _sealed(evs: list[Event]) -> bool:
    return any(isinstance(e, ArtifactsSealed) for e in evs)


def _judged(evs: list[Event]) -> bool:
    return any(isinstance(e, JudgmentRecorded) and e.judge_id == JUDGE_ID for e in evs)


# When each service is killed: while it holds work in flight.
KILL_WHEN: dict[str, Callable[[list[Event]], bool]] = {
    "sandbox-manager": _step(1),  # sandboxes live, runs mid-way
    "runner": _step(1),  # agent loops mid-conversation
    "judge": _sealed,  # the first sealed run is being judged
    "rules": _sealed,
    "aggregator": _step(0),  # folding while events arrive
}


@pytest.mark.slow
@pytest.mark.parametrize("victim", list(KILL_WHEN))
async def test_sigkill_mid_campaign_then_restart(
    victim: str, bus: Bus, settings: Settings, cast: Cast, base: Baseline
) -> None:
    store = open_store(settings)
    async with ServiceSet.running(settings, cast) as services:
        await cast.submit(bus, store)
        before = await wait_until(
            bus, KILL_WHEN[victim], timeout=90, services=services, what=f"{victim} busy"
        )
        if victim == "judge":
            await asyncio.sleep(0.4)  # into the judge's conversation
        await services.kill(victim)
        print(f"\n[kill {victim}] SIGKILL after {len(before)} events")
        await asyncio.sleep(1.0)
        await services.start(victim)
        await wait_until(
            bus,
            campaign_complete(cast.run_ids),
            timeout=120,
            services=services,
            what="a complete campaign after the kill",
        )
        if victim == "aggregator":
            # The restarted aggregator's own report converges on a fresh rebuild's.
            want = await full_report(bus)
            deadline = asyncio.get_running_loop().time() + 30
            while aggregator_report(settings) != want:
                assert asyncio.get_running_loop().time() < deadline, (
                    "aggregator report never matched a rebuild"
                )
                await asyncio.sleep(0.5)
            print("[kill aggregator] its written report equals a fresh rebuild, byte for byte")
    await check_against_baseline(bus, base, label=f"kill {victim}")
