"""Issue #53 item 1: a frozen web replays through `assay run`.

A campaign records its web through the real runner (a SearXNG stand-in and a page
server); `assay web export` writes it as a tar, `assay web import` stores it in a fresh
home, and `assay run`'s `run_campaign` replays it there with both stand-ins stopped: the
transcripts and the judges' inputs are the recording's bytes. A campaign naming a
snapshot the home lacks (or one whose blobs it lacks) is refused in one line naming what
is missing and the command that brings it, exit 2, before a run directory is made.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from assay.bus import Bus
from assay.config import Settings
from assay.embedded import NatsServer
from assay.store import LocalBlobStore
from assay_cli.run import run_campaign
from assay_schemas import CampaignSpec, Event
from assay_testing.pipeline import campaign, scripted_agent, settings_env, write_task
from assay_testing.scripted import ScriptedModelServer
from tests.e2e.test_run_outcome import ROOT
from tests.runner.test_web_pipeline import (
    _judge_inputs,
    _transcript,
    _web,
    record_ecoli,
    scripted,
)

__all__ = ["scripted"]  # the scripted model server fixture, shared with the web pipeline's test

pytestmark = pytest.mark.timeout(600)


def _assay(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay_cli", *args],
        cwd=ROOT,
        env={**(env or os.environ), "ASSAY_HOME": str(home), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _campaign_file(path: Path, spec: CampaignSpec) -> Path:
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_defaults=True)))
    return path


async def _events_of(run_settings: Settings) -> list[Event]:
    with NatsServer(run_settings.home / "nats") as nats:
        async with Bus(
            run_settings.model_copy(update={"nats_url": nats.url}), service="test"
        ) as bus:
            return [e.event async for e in bus.replay()]


async def test_a_frozen_web_replays_through_assay_run_with_the_same_bytes(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    recorded = await record_ecoli(bus, settings, tmp_path, scripted)
    record_transcript = _transcript(recorded.events, "rec")
    record_judge = _judge_inputs(scripted)
    assert any("doubles about every 20 minutes" in turn for turn in record_judge)

    # Carried as a user carries it: exported from the recording home, imported elsewhere.
    tar = tmp_path / "web.tar"
    done = _assay(
        settings.home,
        "web",
        "export",
        "--campaign",
        "rec",
        "--out",
        str(tar),
        env=settings_env(settings),
    )
    assert done.returncode == 0, done.stderr
    fresh = tmp_path / "fresh"
    done = _assay(fresh, "web", "import", str(tar))
    assert done.returncode == 0, done.stderr
    sha = done.stdout.split()[0]

    scripted.clear_requests()
    web = _web("replay", recorded.web_base, snapshot=sha)
    replayed = campaign("rep", [recorded.agent], judges=[recorded.judge], web=web)
    base = settings.model_copy(update={"home": fresh})
    out = io.StringIO()
    outcome = await asyncio.to_thread(  # it runs its own event loop
        run_campaign,
        recorded.tasks,
        _campaign_file(tmp_path / "rep.yaml", replayed),
        settings=base,
        console=Console(file=out, width=200),
        timeout_s=300,
        check=False,
    )
    text = out.getvalue()
    assert outcome.problems.ok and outcome.settled, text[-3000:]
    assert "doctor" not in text.split("look further")[0]
    run_events = await _events_of(base.model_copy(update={"home": outcome.workdir}))
    assert _transcript(run_events, "rep") == record_transcript
    assert _judge_inputs(scripted) == record_judge


def _refused(home: Path, tmp_path: Path, snapshot: str) -> subprocess.CompletedProcess[str]:
    tasks = tmp_path / "tasks"
    write_task(tasks, "t1", "Say hello.", {})
    agent = scripted_agent("a1", "agent", "http://127.0.0.1:9/v1")
    spec = campaign("rep", [agent], web=_web("replay", "http://127.0.0.1:9", snapshot=snapshot))
    file = _campaign_file(tmp_path / "rep.yaml", spec)
    return _assay(home, "run", str(tasks), "--campaign", str(file), "--skip-checks")


def _one_line_refusal(done: subprocess.CompletedProcess[str], home: Path) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "assay web import" in line and "--home" not in line
    assert not (home / "runs").exists() or list((home / "runs").iterdir()) == []
    return line


def test_a_snapshot_the_home_lacks_is_refused_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sha = "ab" * 32
    line = _one_line_refusal(_refused(home, tmp_path, sha), home)
    assert f"web snapshot {sha[:12]} is not in {home.resolve() / 'blobs'}" in line


def _source(text_sha256: str) -> dict[str, Any]:
    return {
        "kind": "fetch",
        "key": "cd" * 32,
        "request": "https://example.org/",
        "fetched_at": "2025-01-01T00:00:00Z",
        "text_sha256": text_sha256,
    }


def test_a_snapshot_whose_blobs_the_home_lacks_is_refused_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    page = LocalBlobStore(tmp_path / "elsewhere").put_bytes(b"a page that was recorded")
    snapshot = LocalBlobStore(home / "blobs").put_bytes(json.dumps([_source(page.sha256)]).encode())
    line = _one_line_refusal(_refused(home, tmp_path, snapshot.sha256), home)
    assert f"web snapshot {snapshot.sha256[:12]}" in line
    assert f"1 of its 1 blob(s), e.g. {page.sha256[:12]}" in line


@pytest.mark.parametrize(
    "planted",
    [b"not json", json.dumps([{"kind": "fetch"}]).encode(), json.dumps({"a": 1}).encode()],
)
def test_a_blob_that_is_no_snapshot_is_refused_in_one_line(tmp_path: Path, planted: bytes) -> None:
    home = tmp_path / "home"
    snapshot = LocalBlobStore(home / "blobs").put_bytes(planted)
    line = _one_line_refusal(_refused(home, tmp_path, snapshot.sha256), home)
    assert f"web snapshot {snapshot.sha256[:12]}" in line and "not a list of web sources" in line
