"""Finding 1 (issue #24) through the CLI: `assay run --timeout 120` on a program agent
whose final answer is huge and pathological returns, with every run judged."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import yaml

from assay.config import Settings
from tests.e2e.test_run_outcome import assay_run

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = ("--timeout", "120")
TASK = "qpcr_ddct"
# Under 1 MB (one bus message); each part was quadratic for some pattern of the judges.
ANSWER = (
    "'A' * 150_000 + ' ' + 'a/' * 80_000 + ' ' + 'a.' * 80_000 + ' <' + ' ' * 80_000"
    " + 'p<' * 80_000 + ' ' + 'x' * 80_000 + '.csv ' + 'ignore ' * 10_000"
)


def test_assay_run_returns_on_a_huge_final_answer(settings: Settings, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    shutil.copytree(ROOT / "examples" / "tasks" / TASK, tasks / TASK)
    code = f"open('answer.txt', 'w').write({ANSWER})"
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(
        yaml.safe_dump(
            {
                "campaign_id": "huge",
                "scripted": True,
                "agents": [
                    {
                        "agent_id": "loud",
                        "model": "none",
                        "kind": "program",
                        "program": {
                            "command": ["python3", "-c", code],
                            "answer_file": "answer.txt",
                        },
                    }
                ],
                "judges": [
                    {"judge_id": "judge-strict", "model": "scripted-judge-strict", "family": "x"}
                ],
            }
        )
    )
    started = time.monotonic()
    out = assay_run(settings, tasks, campaign, *TIMEOUT, timeout=240)
    text = out.stdout + out.stderr
    assert time.monotonic() - started < 150, text[-3000:]
    assert out.returncode == 0, text[-3000:]
    [run_dir] = list((settings.home / "runs").glob("huge-*"))
    report = json.loads((run_dir / "report.json").read_text())
    judges = {j["judge_id"]: j for j in report["judges"]}
    assert judges["rules"]["n_verdicts"] == 1 and judges["judge-strict"]["n_verdicts"] == 1
