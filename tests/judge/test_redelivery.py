"""A judge that dies after publishing, before its ack, never duplicates a judgment."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from typing import Any

import pytest

from assay.bus import Published
from assay_schemas import Event, JudgmentRecorded

from .cases import Judging, judgments, reading_judge, verdict

pytestmark = pytest.mark.timeout(60)


async def test_redelivery_after_crash_does_not_duplicate(judging: Judging) -> None:
    judging.settings = settings = judging.settings.model_copy(update={"ack_wait_s": 1.5})
    bus, server = judging.bus, judging.server
    model = judging.scripted(
        reading_judge([("read_file", {"path": "out.csv"})], verdict(6, files=["out.csv"]))
    )
    spec = judging.spec("fragile", model, sampling_times=1)
    await judging.campaign([spec])

    doomed = judging.llm(spec)
    real_publish = doomed.bus.publish
    published, both_judged, crash = asyncio.Event(), asyncio.Event(), asyncio.Event()
    arrived: list[int] = []

    class Crashed(Exception):
        """The instance is gone; nothing after this point reaches the server."""

    async def publish_then_die(event: Event, **kw: Any) -> Published:
        if not isinstance(event, JudgmentRecorded):
            return await real_publish(event, **kw)
        arrived.append(event.sample)
        if len(arrived) == 2:
            both_judged.set()
        if not published.is_set():
            published.set()
            await real_publish(event, **kw)
        await crash.wait()  # the other sample never gets out; this one dies before its ack
        raise Crashed

    doomed.bus.publish = publish_then_die  # type: ignore[method-assign]
    await doomed.start()
    try:
        # The task asks for 2 samples (more than the judge's 1): the larger wins.
        await judging.seal(final_message="see out.csv", sampling_times=2)
        await asyncio.wait_for(both_judged.wait(), 20)
        await judging.wait(lambda evs: len(judgments(evs)) == 1)
        # The instance dies: its connection goes first, so no ack, nack or heartbeat is sent.
        await doomed.bus.broker.connection.close()
        crash.set()
    finally:
        with contextlib.suppress(Exception):  # a dead instance cannot stop cleanly
            await doomed.stop()
    calls_before = len(server.requests(model))
    assert calls_before == 4  # both samples ran their model turns; one judgment got out

    async with judging.running(judging.llm(spec)):
        events = await judging.wait(lambda evs: len(judgments(evs)) == 2)
        await asyncio.sleep(settings.ack_wait_s + 0.5)  # any further redelivery would show now
        events = [e.event async for e in bus.replay()]
    counts = Counter((e.run_id, e.judge_id, e.sample) for e in judgments(events))
    assert counts == {("r1", "fragile", 0): 1, ("r1", "fragile", 1): 1}
    # The sample already on the log was not judged again: only one more conversation.
    assert len(server.requests(model)) == calls_before + 2
