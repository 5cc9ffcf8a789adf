"""Issue #53 item 5: a campaign refused for what is in its tasks leaves no run directory.

The task below has a reference check whose pattern RE2 cannot run (a look-behind);
`assay run` says so in one line naming task and check, exits non-zero, and creates
nothing under the home's runs/ (it used to start a stack in a new, then empty, folder).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.e2e.test_run_outcome import ROOT, TASK, one_task


def test_an_re2_invalid_pattern_is_refused_before_a_run_directory_is_made(tmp_path: Path) -> None:
    tasks, campaign = one_task(tmp_path)
    task_file = tasks / TASK / "task.yaml"
    task = yaml.safe_load(task_file.read_text())
    task["reference_checks"] = [
        {"kind": "contains", "name": "lookbehind", "path": "answer.md", "pattern": "(?<=p )0"}
    ]
    task_file.write_text(yaml.safe_dump(task))
    home = tmp_path / "home"
    done = subprocess.run(
        [sys.executable, "-m", "assay_cli", "run", str(tasks), "--campaign", str(campaign)],
        cwd=ROOT,
        env={**os.environ, "ASSAY_HOME": str(home), "ASSAY_STATE_DIR": str(tmp_path / "s")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    said = done.stderr.strip().splitlines()
    assert len(said) == 1, done.stderr
    assert f"task {TASK}: reference_checks[0] ('lookbehind'): pattern" in said[0]
    assert not (home / "runs").exists() or list((home / "runs").iterdir()) == []
