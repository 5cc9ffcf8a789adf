"""Three scripted judges score one sealed run through the real SDKs and the real bus."""

from __future__ import annotations

import io
from collections.abc import Iterator

import polars as pl
import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_judge import build
from assay_schemas import ArtifactsSealed, JudgeRegistered
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

from .cases import (
    RUBRIC,
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

GROWTH = b"strain,od\nA,0.1\nA,0.9\nB,0.5\nB,0.6\n"
SCRIPT = (
    b"import pandas as pd\ndf = pd.read_csv('growth.csv')\nprint(df.groupby('strain').od.mean())\n"
)


def _parquet() -> bytes:
    buf = io.BytesIO()
    pl.DataFrame({"strain": ["A", "B"], "mean_od": [0.5, 0.55]}).write_parquet(buf)
    return buf.getvalue()


async def test_three_judges_score_a_sealed_run(
    bus: Bus,
    settings: Settings,
    store: LocalBlobStore,
    server: ScriptedModelServer,
    names: Iterator[str],
) -> None:
    m1, m2, m3 = next(names), next(names), next(names)
    server.add_script(
        m1,
        reading_judge([("read_file", {"path": "analysis.py"})], verdict(8, files=["analysis.py"])),
    )
    server.add_script(
        m2,
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
    server.add_script(
        m3,
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
        judge_spec("j-gpt", m1, server.openai_base_url, family="gpt"),
        judge_spec("j-claude", m2, server.base_url, provider="anthropic", family="claude"),
        judge_spec("j-gemma", m3, server.openai_base_url, family="gemma"),
    ]
    await start_campaign(bus, "c1", judges)
    services = [build(settings, j, store=store, providers=fast_provider) for j in judges]
    async with running(*services):
        sealed = await seal_run(
            bus,
            store,
            campaign_id="c1",
            run_id="run1",
            attachments={"growth.csv": GROWTH},
            files={
                "analysis.py": SCRIPT,
                "results/means.parquet": _parquet(),
                "report.md": b"# Report\nA and B differ.\n",
            },
            final_message="Strain B grows faster (see results/means.parquet).",
        )
        await seal_run(
            bus,
            store,
            campaign_id="c1",
            run_id="broken",
            files={},
            final_message="",
            outcome="failed",
        )
        events = await wait_log(bus, lambda evs: len(judgments(evs)) >= 3)
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
