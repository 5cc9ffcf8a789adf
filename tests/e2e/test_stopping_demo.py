"""The stopping demo `make run` runs second (#51): `assay run` on examples/stopping stops
before its last wave, ranks the agents as the same campaign run in full does, and
`assay replay --verify` rebuilds its figures identically. Real sandboxes, real stack.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.config import Settings
from tests.e2e.test_run_outcome import assay_run

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "stopping"
pytestmark = pytest.mark.timeout(1200)  # two campaigns of real sandboxes, on a shared machine

N_TASKS = sum(1 for p in (DEMO / "tasks").iterdir() if p.is_dir())


def _report(settings: Settings, campaign_id: str) -> tuple[Path, dict[str, Any]]:
    [found] = list((settings.home / "runs").glob(f"{campaign_id}-*/report.json"))
    return found.parent, json.loads(found.read_text())


def _ranking(report: dict[str, Any]) -> list[str]:
    ranks = sorted(report["statistics"]["agent_ranks"], key=lambda r: r["rank"])
    return [r["agent_id"] for r in ranks]


@pytest.mark.slow
def test_the_stopping_demo_stops_early_with_the_full_runs_ranking(
    settings: Settings, tmp_path: Path
) -> None:
    spec = yaml.safe_load((DEMO / "campaign.yaml").read_text())
    rule = spec["stopping"]
    waves = -(-N_TASKS // rule["check_every"])
    out = assay_run(settings, DEMO / "tasks", DEMO / "campaign.yaml", timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "stopping-demo stopped early: ranking_settled" in out.stdout
    run_dir, stopped = _report(settings, spec["campaign_id"])
    (row,) = stopped["stopping"]
    assert row["reason"] == "ranking_settled" and row["settled"] and row["warnings"] == ""
    # Before its last wave: whole waves of runs never ran, each cancelled, none failed.
    assert row["waves_checked"] < waves
    planned = N_TASKS * len(spec["agents"]) * spec["epochs"]
    assert row["runs_planned"] == planned
    assert row["runs_cancelled"] >= rule["check_every"] * len(spec["agents"])
    assert row["runs_done"] + row["runs_cancelled"] == planned
    assert stopped["run_states"] == [{"n_runs": row["runs_done"], "state": "judged"}]
    assert {i["kind"] for i in stopped["anytime_intervals"]} == {
        "score",
        "pass_share",
        "difference",
    }

    verify = subprocess.run(
        [sys.executable, "-m", "assay_cli", "replay", "--verify", "--home", str(run_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = verify.stdout + verify.stderr
    assert verify.returncode == 0, said[-4000:]
    assert "identical" in said and "differ" not in said

    # The same campaign without `stopping:`, every run run: the same ranking.
    full_id = spec["campaign_id"] + "-full"
    full = {**{k: v for k, v in spec.items() if k != "stopping"}, "campaign_id": full_id}
    full_file = tmp_path / "full.yaml"
    full_file.write_text(yaml.safe_dump(full))
    out = assay_run(settings, DEMO / "tasks", full_file, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    _, whole = _report(settings, full_id)
    assert whole["stopping"] == []
    assert whole["run_states"] == [{"n_runs": planned, "state": "judged"}]
    assert _ranking(stopped) == _ranking(whole) == [row["leader"], "empty"]
