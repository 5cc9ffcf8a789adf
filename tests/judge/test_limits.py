"""Judges share the per-model concurrency limit of the providers' limiter registry."""

from __future__ import annotations

import pytest

from assay_testing.scripted import ScriptedSequence, ScriptReply

from .cases import Judging, judgments, verdict

pytestmark = pytest.mark.timeout(60)

LATENCY = 0.25


async def test_two_judges_on_one_model_never_exceed_its_limit(judging: Judging) -> None:
    model = judging.scripted(ScriptedSequence([ScriptReply.call("submit_verdict", verdict())]))
    judging.server.set_latency(model, LATENCY)
    # Each judge alone would run 2 runs at once (4 in all); the model allows 2 in flight.
    specs = [judging.spec(f"twin{i}", model, max_concurrency=2) for i in (1, 2)]
    await judging.campaign(specs)
    async with judging.running(*(judging.llm(s) for s in specs)):
        for i in range(4):
            await judging.seal(f"r{i}", files={"o.txt": b"x"}, final_message="ok")
        events = await judging.wait(lambda evs: len(judgments(evs)) == 8)
    assert len(judgments(events)) == 8
    starts = sorted(r.received_at for r in judging.server.requests(model))
    assert len(starts) == 8
    # A request holds its slot for at least LATENCY, so no window that long sees 3 starts.
    window = LATENCY * 0.9
    assert max(sum(1 for t in starts if s <= t < s + window) for s in starts) <= 2
