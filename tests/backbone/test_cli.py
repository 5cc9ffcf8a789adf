"""`assay submit` then `assay events`, as a user would type them, against the real server."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from assay.config import Settings
from assay.embedded import NatsServer, find_free_port
from assay_testing.pipeline import settings_env

ASSAY = [sys.executable, "-m", "assay_cli"]


def run_cli(args: list[str], settings: Settings, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**settings_env(settings), "COLUMNS": "200"}
    return subprocess.run(
        [*ASSAY, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60
    )


def test_submit_then_events(settings: Settings, tmp_path: Path) -> None:
    task = tmp_path / "tasks" / "growth"
    task.mkdir(parents=True)
    (task / "prompt.md").write_text("growth rates per strain pls\n")
    (task / "od600.csv").write_text("time,strain,od\n0,A,0.05\n")
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(
        "campaign_id: cli-demo\nagents:\n  - {agent_id: careful, model: scripted-careful}\n"
    )
    out = run_cli(
        ["submit", str(tmp_path / "tasks"), "--campaign", str(campaign)], settings, tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert "1 task(s) submitted" in out.stdout
    events = run_cli(["events"], settings, tmp_path)
    assert events.returncode == 0, events.stderr
    assert "CampaignStarted" in events.stdout and "TaskSubmitted" in events.stdout
    assert "growth" in events.stdout
    as_json = run_cli(["events", "--json", "--type", "TaskSubmitted"], settings, tmp_path)
    assert as_json.stdout.count("\n") == 1 and '"od600.csv"' in as_json.stdout


def test_submit_refuses_hostile_task_with_a_clear_error(settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(
        '{"task_id": "evil", "prompt": "p", "attachments": ["../x"]}\n'
    )
    campaign = tmp_path / "c.yaml"
    campaign.write_text("campaign_id: c\nagents: [{agent_id: a, model: m}]\n")
    out = run_cli(
        ["submit", str(tmp_path / "t.jsonl"), "--campaign", str(campaign)], settings, tmp_path
    )
    assert out.returncode == 2
    assert "task evil: attachments[0]: path '../x' escapes" in out.stderr.replace("\n", "")
    events = run_cli(["events", "--json"], settings, tmp_path)
    assert events.stdout == ""


def test_bad_campaign_file_names_the_field(settings: Settings, tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text("campaign_id: c\nagents: []\nepochs: 0\n")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "prompt.md").write_text("x")
    out = run_cli(["submit", str(tmp_path / "t"), "--campaign", str(campaign)], settings, tmp_path)
    assert out.returncode == 2
    assert "agents" in out.stderr and "epochs" in out.stderr


def _assay(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ASSAY, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "ASSAY_HOME": str(tmp_path / "home"), "COLUMNS": "200", **env},
        cwd=tmp_path,
        timeout=60,
    )


def test_unreachable_nats_is_said_in_one_line_within_seconds(tmp_path: Path) -> None:
    url = f"nats://127.0.0.1:{find_free_port()}"
    view = ["view", "--port", str(find_free_port())]
    for command in (["events"], ["report"], ["dlq", "list"], ["watch", "--exit"], view):
        started = time.monotonic()
        out = _assay(command, tmp_path, ASSAY_NATS_URL=url)
        took = time.monotonic() - started
        assert out.returncode == 2, (command, out.stdout, out.stderr)
        assert took < 20, f"{command}: {took:.0f}s before a word"
        [line] = out.stderr.strip().splitlines()
        assert f"cannot reach NATS at {url}" in line and "refused" in line, line
        # Refused outright: said at once, not after waiting out the connect timeout.
        assert "within" not in line, line
        assert "assay up" in line and "ASSAY_NATS_URL" in line and "--home" in line
    verbose = _assay(["-v", "events"], tmp_path, ASSAY_NATS_URL=url)
    assert verbose.returncode == 2 and "Traceback" in verbose.stderr
    assert verbose.stderr.rstrip().splitlines()[-1].startswith("error: cannot reach NATS")


def test_port_conflict_names_options_that_exist(nats_server: NatsServer, tmp_path: Path) -> None:
    out = _assay(["up", "--port", str(nats_server.port)], tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    [line] = out.stderr.strip().splitlines()
    assert f"port {nats_server.port}" in line and "already in use" in line
    assert "--port" in line and "ASSAY_NATS_URL" in line
    assert "ASSAY_NATS_PORT" not in line


def test_keys_enroll_names_and_takes_publisher_keys(tmp_path: Path) -> None:
    help_text = _assay(["keys", "enroll", "--help"], tmp_path).stdout
    assert "publisher-<campaign>" in " ".join(help_text.split())
    out = _assay(["keys", "enroll", "publisher-c1", "--out", str(tmp_path / "keys")], tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "keys" / "publisher-c1.seed").stat().st_mode & 0o777 == 0o600
    for bad in ("publisher-a.b", "publisher-*", "judge-../x"):
        refused = _assay(["keys", "enroll", bad], tmp_path)
        assert refused.returncode == 2, (bad, refused.stdout)
        [line] = refused.stderr.strip().splitlines()
        assert "is not an id" in line
    assert not list((tmp_path / "home" / "keys").glob("publisher-a*"))
