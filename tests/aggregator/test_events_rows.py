"""`assay events` takes the counting rule's decision too: a refused event is marked in its
row, and every row of a run names the run's agent (issue #24, one decision of what counts)."""

from __future__ import annotations

from pathlib import Path

from assay.bus import Bus
from assay.config import Settings
from assay_aggregator import fold
from assay_schemas import DimensionScore, JudgmentRecorded
from tests.backbone.test_cli import run_cli

from .conftest import Published


async def test_events_marks_refused_rows_and_names_each_runs_agent(
    bus: Bus, settings: Settings, published: Published, tmp_path: Path
) -> None:
    v = next(e for e in published.events if isinstance(e, JudgmentRecorded) and e.scores)
    tens = {k: DimensionScore(score=10) for k in v.scores}
    await bus.publish(v.model_copy(update={"event_id": "second", "scores": tens}))
    out = run_cli(["events", "--run", v.run_id or ""], settings, tmp_path)
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    agent = fold(enumerate(published.events, 1)).runs[v.run_id or ""].agent_id
    assert rows and all(f" {v.run_id} {agent} " in row for row in rows), rows
    refused = [row for row in rows if "REFUSED" in row]
    assert len(refused) == 1 and "second verdict" in refused[0]
    assert refused[0].split()[0] == str(published.head + 1)
