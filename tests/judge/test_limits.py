"""Judges share the per-model concurrency limit of the providers' limiter registry."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_judge import build
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

from .cases import (
    fast_provider,
    judge_spec,
    judgments,
    running,
    seal_run,
    start_campaign,
    verdict,
    wait_log,
)

pytestmark = pytest.mark.timeout(60)

LATENCY = 0.25


async def test_two_judges_on_one_model_never_exceed_its_limit(
    bus: Bus,
    settings: Settings,
    store: LocalBlobStore,
    server: ScriptedModelServer,
    names: Iterator[str],
) -> None:
    model = next(names)
    server.add_script(model, ScriptedSequence([ScriptReply.call("submit_verdict", verdict())]))
    server.set_latency(model, LATENCY)
    # Each judge alone would run 2 runs at once (4 in all); the model allows 2 in flight.
    specs = [
        judge_spec(f"twin{i}", model, server.openai_base_url, max_concurrency=2) for i in (1, 2)
    ]
    await start_campaign(bus, "c1", specs)
    async with running(*(build(settings, s, store=store, providers=fast_provider) for s in specs)):
        for i in range(4):
            await seal_run(
                bus,
                store,
                campaign_id="c1",
                run_id=f"r{i}",
                files={"o.txt": b"x"},
                final_message="ok",
            )
        events = await wait_log(bus, lambda evs: len(judgments(evs)) == 8)
    assert len(judgments(events)) == 8
    starts = sorted(r.received_at for r in server.requests(model))
    assert len(starts) == 8
    # A request holds its slot for at least LATENCY, so no window that long sees 3 starts.
    window = LATENCY * 0.9
    assert max(sum(1 for t in starts if s <= t < s + window) for s in starts) <= 2
