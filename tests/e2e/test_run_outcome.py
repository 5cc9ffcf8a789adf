"""`assay run` ends truthfully: it refuses what cannot succeed, exits non-zero with the causes
when runs failed for the platform's sake, and waits for every verdict the log owes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.config import Settings

ROOT = Path(__file__).resolve().parents[2]
TASK = "qpcr_ddct"
CAMPAIGN = {
    "campaign_id": "small",
    "scripted": True,
    "agents": [{"agent_id": "careful", "model": "scripted-careful", "family": "acme"}],
    "judges": [{"judge_id": "judge-strict", "model": "scripted-judge-strict", "family": "orbit"}],
}


def one_task(tmp: Path, sampling_times: int = 1) -> tuple[Path, Path]:
    """One bundled task (with its scripted solution) and a one-agent, one-judge campaign."""
    tasks = tmp / "bundle" / "tasks"
    shutil.copytree(ROOT / "examples" / "tasks" / TASK, tasks / TASK)
    for folder in ("solutions", "references"):
        shutil.copytree(ROOT / "examples" / folder / TASK, tmp / "bundle" / folder / TASK)
    task_file = tasks / TASK / "task.yaml"
    task = yaml.safe_load(task_file.read_text())
    task["judge"] = {**task.get("judge", {}), "sampling_times": sampling_times}
    task_file.write_text(yaml.safe_dump(task))
    campaign = tmp / "campaign.yaml"
    campaign.write_text(yaml.safe_dump(CAMPAIGN))
    return tasks, campaign


def assay_run(
    settings: Settings,
    tasks: Path,
    campaign: Path,
    *args: str,
    timeout: float = 600,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """`assay run TASKS --campaign CAMPAIGN ARGS` in its own process, keeping its state in
    the test's home (production defaults otherwise, not the session's short settings)."""
    return subprocess.run(
        [sys.executable, "-m", "assay_cli", "run", str(tasks), "--campaign", str(campaign), *args],
        cwd=ROOT,
        env={
            **os.environ,
            "ASSAY_HOME": str(settings.home),
            "ASSAY_STATE_DIR": str(settings.state_dir),
            "COLUMNS": "200",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_missing_runtime_is_refused_before_the_campaign_starts(
    settings: Settings, tmp_path: Path
) -> None:
    tasks, campaign = one_task(tmp_path)
    empty = tmp_path / "no-runtime"
    out = assay_run(settings, tasks, campaign, ASSAY_SANDBOX_CACHE=str(empty))
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "sandbox runtime" in text and "make sandbox-rootfs" in text
    assert "cannot run the campaign" in text
    assert not (settings.home / "runs").exists(), "nothing was started"


def test_infrastructure_failures_exit_non_zero_with_their_cause(
    settings: Settings, tmp_path: Path
) -> None:
    tasks, campaign = one_task(tmp_path)
    empty = tmp_path / "no-runtime"
    out = assay_run(settings, tasks, campaign, "--skip-checks", ASSAY_SANDBOX_CACHE=str(empty))
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "did not go as planned" in text and "SandboxBackendUnavailable" in text
    [run_dir] = list((settings.home / "runs").glob("small-*"))
    report = json.loads((run_dir / "report.json").read_text())
    [cause] = report["problems"]["causes"]
    assert (cause["stage"], cause["error_class"], cause["count"]) == (
        "sandbox",
        "SandboxBackendUnavailable",
        1,
    )
    assert "no runtime rootfs" in cause["first_message"]
    assert "SandboxBackendUnavailable" in (run_dir / "report.html").read_text()


@pytest.mark.slow
def test_task_sampling_above_the_judges_is_waited_for(settings: Settings, tmp_path: Path) -> None:
    tasks, campaign = one_task(tmp_path, sampling_times=3)
    out = assay_run(settings, tasks, campaign)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    [run_dir] = list((settings.home / "runs").glob("small-*"))
    report = json.loads((run_dir / "report.json").read_text())
    judges = {j["judge_id"]: j for j in report["judges"]}
    assert judges["judge-strict"]["n_verdicts"] == 3, "every sample the task asks for"
    assert judges["rules"]["n_verdicts"] == 1
    assert report["problems"]["complete"] and not report["problems"]["causes"]
    assert report["run_states"] == [{"n_runs": 1, "state": "judged"}]


def assay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay_cli", *args],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def logged_events(run_dir: Path) -> list[dict[str, Any]]:
    """The run directory's log as `assay events --json` prints it (not read with the code
    under test), one dict an event."""
    out = assay("events", "--home", str(run_dir), "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_a_finished_run_directory_reopens_with_home(settings: Settings, tmp_path: Path) -> None:
    tasks, campaign = one_task(tmp_path)
    empty = tmp_path / "no-runtime"
    assay_run(settings, tasks, campaign, "--skip-checks", ASSAY_SANDBOX_CACHE=str(empty))
    [run_dir] = list((settings.home / "runs").glob("small-*"))
    log_files = {p: p.stat().st_mtime_ns for p in (run_dir / "nats").rglob("*") if p.is_file()}

    events = assay("events", "--home", str(run_dir), "--json")
    assert events.returncode == 0, events.stderr
    lines = [json.loads(line) for line in events.stdout.splitlines()]
    failed = [e for e in lines if e["event_type"] == "RunFailed"]
    assert [e["stage"] for e in failed] == ["sandbox"]

    out = tmp_path / "again.json"
    again = assay("report", "--home", str(run_dir), "--json", str(out), "--resamples", "10")
    assert again.returncode == 0, again.stderr
    assert json.loads(out.read_text())["infrastructure_failures"][0]["stage"] == "sandbox"

    audit = assay("audit", failed[0]["run_id"], "--home", str(run_dir))
    assert audit.returncode == 0, audit.stderr
    assert "RunFailed" in audit.stdout

    # Its one run failed at the sandbox: an outcome, so the log's invariants hold.
    check = assay("check", "--home", str(run_dir), "--json")
    assert check.returncode == 0, check.stdout + check.stderr
    doc = json.loads(check.stdout)
    assert doc["clean"] and doc["runs"] == 1 and doc["breaches"] == []

    now = {p: p.stat().st_mtime_ns for p in (run_dir / "nats").rglob("*") if p.is_file()}
    assert now == log_files, "the run directory's log is left as it was"
    missing = assay("events", "--home", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "not a run directory" in missing.stderr
