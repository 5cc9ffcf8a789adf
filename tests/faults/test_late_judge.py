"""A judge added to the running split stack after its campaign finished: `assay serve judge`
back-fills every sealed run within 3 minutes, printing its progress, and the aggregator's
live report names it as joined late (the declared jury stays the headline), equal to a
rebuild of the log."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from assay.bus import Bus
from assay.config import Settings
from assay.store import open_store
from assay_aggregator.check import check_stream
from assay_schemas import JudgmentRecorded
from assay_testing.demo import JudgeTemper, judge_script
from assay_testing.pipeline import settings_env, wait_for_output
from assay_testing.scripted import ScriptedModelServer

from .harness import (
    JUDGE_ID,
    Cast,
    ServiceSet,
    aggregator_report,
    campaign_complete,
    full_report,
    wait_until,
)

pytestmark = pytest.mark.timeout(480)

LATE = "late"


async def test_a_late_serve_judge_backfills_the_running_stack(
    bus: Bus, settings: Settings, cast: Cast, models: ScriptedModelServer, tmp_path: Path
) -> None:
    store = open_store(settings)
    models.add_script("m-late", judge_script(JudgeTemper(LATE, -2)))
    late = cast.judge.model_copy(update={"judge_id": LATE, "model": "m-late"})
    spec = tmp_path / "late.yaml"
    spec.write_text(yaml.safe_dump({"judge": late.model_dump(mode="json")}))
    runs = set(cast.run_ids)

    def late_verdicts(events: list[object]) -> set[str | None]:
        return {e.run_id for e in events if isinstance(e, JudgmentRecorded) and e.judge_id == LATE}

    printed = tmp_path / "late.out"
    loop = asyncio.get_running_loop()
    async with ServiceSet.running(settings, cast) as services:
        await cast.submit(bus, store)
        await wait_until(
            bus,
            campaign_complete(runs),
            timeout=150,
            services=services,
            what="the campaign sealed and judged by its declared jury",
        )
        began = loop.time()
        proc = subprocess.Popen(
            [sys.executable, "-m", "assay_cli", "serve", "judge", "--judge", str(spec)],
            env=settings_env(settings),
            stdout=printed.open("wb"),
            stderr=subprocess.STDOUT,
        )
        try:
            await wait_until(
                bus,
                lambda evs: late_verdicts(evs) == runs,
                timeout=180,
                services=services,
                what="every sealed run judged by the late judge",
            )
            took = loop.time() - began
            # its last progress line follows its last verdict
            await wait_for_output(printed, f"{len(runs)} of {len(runs)} runs judged")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        # The live aggregator's report converges on a rebuild's, naming the late judge.
        want = await full_report(bus)
        deadline = loop.time() + 60
        while aggregator_report(settings) != want:
            assert loop.time() < deadline, "the aggregator's report never matched a rebuild"
            await asyncio.sleep(0.5)
        # Every sealed run has a verdict from each judge enabled for it, the late one too.
        checked = await check_stream(settings, replay=True, grace_s=0.0)
        assert checked.clean, [str(b) for b in checked.breaches]
    out = printed.read_text()
    print(f"\nlate judge back-filled {len(runs)} runs in {took:.1f}s\n{out}")
    assert took < 180 and proc.returncode == 0, out
    assert (
        f"0 of {len(runs)} runs judged" in out and f"{len(runs)} of {len(runs)} runs judged" in out
    )
    report = json.loads(want)
    [joined] = report["late_judges"]
    assert (joined["judge_id"], joined["n_runs"], joined["n_backfilled"]) == (
        LATE,
        len(runs),
        len(runs),
    )
    headline = {r["judge_id"] for r in report["statistics"]["below_anchor_shares"]}
    beside = {r["judge_id"] for r in report["with_late_judges"]["below_anchor_shares"]}
    assert JUDGE_ID in headline and LATE not in headline and LATE in beside
