"""A judge added to a finished campaign back-fills every run while new runs keep flowing."""

from __future__ import annotations

from collections import Counter

import pytest

from assay_schemas import JudgeRegistered

from .cases import Judging, judgments, of_type, reading_judge, verdict

pytestmark = pytest.mark.timeout(60)


async def _seal(judging: Judging, run_id: str) -> None:
    await judging.seal(
        run_id, files={"out.csv": f"run,{run_id}\n".encode()}, final_message="see out.csv"
    )


async def test_third_judge_backfills_without_downtime(judging: Judging) -> None:
    models = [
        judging.scripted(
            reading_judge([("read_table", {"path": "out.csv"})], verdict(5 + i, files=["out.csv"]))
        )
        for i in range(3)
    ]
    j1, j2, j3 = (judging.spec(f"j{i + 1}", m) for i, m in enumerate(models))
    await judging.campaign([j1, j2])
    first, second = (judging.llm(j) for j in (j1, j2))
    async with judging.running(first, second):
        for run in ("r1", "r2", "r3"):
            await _seal(judging, run)
        await judging.wait(lambda evs: len(judgments(evs)) == 6)
        # The campaign is finished. A third judge (not in the campaign's jury) is hot-added
        # for this campaign, and a new run arrives while it back-fills.
        third = judging.llm(j3, campaigns={"c1"})
        async with judging.running(third):
            await _seal(judging, "r4")
            events = await judging.wait(lambda evs: len(judgments(evs)) == 12)
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
