"""Three scripted judges score one sealed run through the real SDKs and the real bus."""

from __future__ import annotations

import io

import polars as pl
import pytest

from assay_schemas import ArtifactsSealed, JudgeRegistered
from assay_testing.scripted import ScriptedSequence, ScriptReply

from .cases import RUBRIC, Judging, judge_spec, judgments, of_type, reading_judge, verdict

pytestmark = pytest.mark.timeout(60)

GROWTH = b"strain,od\nA,0.1\nA,0.9\nB,0.5\nB,0.6\n"
SCRIPT = (
    b"import pandas as pd\ndf = pd.read_csv('growth.csv')\nprint(df.groupby('strain').od.mean())\n"
)


def _parquet() -> bytes:
    buf = io.BytesIO()
    pl.DataFrame({"strain": ["A", "B"], "mean_od": [0.5, 0.55]}).write_parquet(buf)
    return buf.getvalue()


async def test_three_judges_score_a_sealed_run(judging: Judging) -> None:
    server = judging.server
    m1 = judging.scripted(
        reading_judge([("read_file", {"path": "analysis.py"})], verdict(8, files=["analysis.py"])),
    )
    m2 = judging.scripted(
        reading_judge(
            [
                ("list_files", {}),
                ("read_table", {"path": "results/means.parquet"}),
                ("read_table", {"path": "growth.csv"}),
            ],
            verdict(6, tags=["no_uncertainty"], files=["results/means.parquet"]),
        ),
    )
    # The third judge sends its verdict in the same turn as a read.
    m3 = judging.scripted(
        ScriptedSequence(
            [
                ScriptReply.call(
                    "read_file", {"path": "/workspace/report.md", "offset": 0, "limit": 5}
                ),
                ScriptReply(
                    tool_calls=(
                        *ScriptReply.call("read_file", {"path": "analysis.py"}).tool_calls,
                        *ScriptReply.call(
                            "submit_verdict", verdict(4, tags=["overclaiming", "no_uncertainty"])
                        ).tool_calls,
                    )
                ),
            ]
        ),
    )
    judges = [
        judging.spec("j-gpt", m1, family="gpt"),
        judge_spec("j-claude", m2, server.base_url, provider="anthropic", family="claude"),
        judging.spec("j-gemma", m3, family="gemma"),
    ]
    await judging.campaign(judges)
    async with judging.running(*(judging.llm(j) for j in judges)):
        sealed = await judging.seal(
            "run1",
            attachments={"growth.csv": GROWTH},
            files={
                "analysis.py": SCRIPT,
                "results/means.parquet": _parquet(),
                "report.md": b"# Report\nA and B differ.\n",
            },
            final_message="Strain B grows faster (see results/means.parquet).",
        )
        await judging.seal("broken", files={}, final_message="", outcome="failed")
        events = await judging.wait(lambda evs: len(judgments(evs)) >= 3)
    recorded = {j.judge_id: j for j in judgments(events)}
    assert set(recorded) == {"j-gpt", "j-claude", "j-gemma"}
    for j in recorded.values():
        assert j.run_id == sealed.run_id and j.sample == 0 and j.causation_id == sealed.event_id
        assert list(j.scores) == RUBRIC.dimension_keys
        assert all(0 <= s.score <= 10 and s.reason for s in j.scores.values())
        assert set(j.failure_tags) <= set(RUBRIC.tag_keys)
        assert j.rubric_id == RUBRIC.rubric_id and j.usage.input_tokens > 0
    assert recorded["j-gpt"].files_opened == ["analysis.py"]
    assert recorded["j-gpt"].files_cited == ["analysis.py"]
    assert recorded["j-gpt"].scores["completeness"].score == 8
    assert recorded["j-claude"].files_opened == ["results/means.parquet", "growth.csv"]
    assert recorded["j-claude"].judge_family == "claude"
    assert recorded["j-gemma"].files_opened == ["report.md", "analysis.py"]
    assert recorded["j-gemma"].failure_tags == ["overclaiming", "no_uncertainty"]
    # The failed run is never judged, and each judge announced itself.
    assert not [j for j in judgments(events) if j.run_id == "broken"]
    assert {r.judge.judge_id for r in of_type(events, JudgeRegistered)} == set(recorded)
    assert len(of_type(events, ArtifactsSealed)) == 2
    # The table tool showed the judge shape, dtypes and a summary, as delimited data.
    [table_req] = [r for r in server.requests(m2) if r.request and r.request.turn == 2]
    shown = table_req.request.tool_results[0].text
    assert (
        shown.startswith('<artifact path="results/means.parquet"')
        and "shape: 2 rows x 2 columns" in shown
    )
    assert "mean_od: Float64" in shown and "summary:" in shown
