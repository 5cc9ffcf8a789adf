"""A judge added to a finished campaign back-fills every run while new runs keep flowing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_judge import build
from assay_schemas import JudgeRegistered
from assay_testing.scripted import ScriptedModelServer

from .cases import (
    fast_provider,
    judge_spec,
    judgments,
    of_type,
    reading_judge,
    running,
    seal_run,
    start_campaign,
    verdict,
    wait_log,
)

pytestmark = pytest.mark.timeout(60)


async def _seal(bus: Bus, store: LocalBlobStore, run_id: str) -> None:
    await seal_run(
        bus,
        store,
        campaign_id="c1",
        run_id=run_id,
        files={"out.csv": f"run,{run_id}\n".encode()},
        final_message="see out.csv",
    )


async def test_third_judge_backfills_without_downtime(
    bus: Bus,
    settings: Settings,
    store: LocalBlobStore,
    server: ScriptedModelServer,
    names: Iterator[str],
) -> None:
    models = [next(names) for _ in range(3)]
    for i, m in enumerate(models):
        server.add_script(
            m,
            reading_judge([("read_table", {"path": "out.csv"})], verdict(5 + i, files=["out.csv"])),
        )
    j1, j2, j3 = (judge_spec(f"j{i + 1}", m, server.openai_base_url) for i, m in enumerate(models))
    await start_campaign(bus, "c1", [j1, j2])
    first, second = (build(settings, j, store=store, providers=fast_provider) for j in (j1, j2))
    async with running(first, second):
        for run in ("r1", "r2", "r3"):
            await _seal(bus, store, run)
        await wait_log(bus, lambda evs: len(judgments(evs)) == 6)
        # The campaign is finished. A third judge (not in the campaign's jury) is hot-added
        # for this campaign, and a new run arrives while it back-fills.
        third = build(settings, j3, store=store, providers=fast_provider, campaigns={"c1"})
        async with running(third):
            await _seal(bus, store, "r4")
            events = await wait_log(bus, lambda evs: len(judgments(evs)) == 12)
        assert first.bus.broker.running and second.bus.broker.running  # never restarted
    per_judge = {j: sorted(e.run_id for e in judgments(events, j)) for j in ("j1", "j2", "j3")}
    assert per_judge == {j: ["r1", "r2", "r3", "r4"] for j in per_judge}
    assert (
        Counter((e.run_id, e.judge_id, e.sample) for e in judgments(events)).most_common(1)[0][1]
        == 1
    )
    assert {e.scores["completeness"].score for e in judgments(events, "j3")} == {7}
    registered = of_type(events, JudgeRegistered)
    assert {(r.judge.judge_id, r.campaign_id) for r in registered} == {
        ("j1", "c1"),
        ("j2", "c1"),
        ("j3", "c1"),
    }
