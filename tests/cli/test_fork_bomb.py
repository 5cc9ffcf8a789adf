"""A fork bomb in a model agent's bash step (issue #54): the step comes back as a timeout
within the sandbox's command timeout plus 2 s, is never run again, the run ends, `assay run`
exits in time, and nothing of the sandbox is left running, on both backends."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from assay.config import Settings
from assay_cli.run import run_campaign
from assay_testing.demo import judge_scripts
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply
from tests.e2e.test_run_outcome import logged_events
from tests.fork_bomb import BOMB, tagged_processes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

EXEC_TIMEOUT_S = 20
MAX_PROCESSES = 64


def _bomber(tag: str) -> ScriptedSequence:
    """Bomb, then look around, then answer. The tag marks every process the bomb starts
    (its environment is inherited), so that what is left of it can be found on the host."""
    return ScriptedSequence(
        [
            ScriptReply.call("bash", {"command": f"export ASSAY_BOMB_TAG={tag}; {BOMB}"}),
            ScriptReply.call("bash", {"command": "echo still here"}),
            ScriptReply.call("submit", {"answer": "Summary: I tried a fork bomb."}),
        ]
    )


def _campaign(tmp: Path, backend: str) -> tuple[Path, Path]:
    tasks = tmp / "bundle" / "tasks" / "bomb"
    tasks.mkdir(parents=True)
    (tasks / "task.yaml").write_text(yaml.safe_dump({"task_id": "bomb", "prompt": "Count to 3."}))
    campaign = {
        "campaign_id": "bomb",
        "scripted": True,
        "agents": [{"agent_id": "bomber", "model": "scripted-bomber", "family": "acme"}],
        "judges": [{"judge_id": "judge-strict", "model": "scripted-judge-strict"}],
        # The tool timeout is left at its default (120 s): the sandbox's is what bounds it.
        "sandbox": {
            "backend": backend,
            "max_processes": MAX_PROCESSES,
            "exec_timeout_s": EXEC_TIMEOUT_S,
        },
    }
    path = tmp / "campaign.yaml"
    path.write_text(yaml.safe_dump(campaign))
    return tasks.parent, path


def _holding(sandbox_id: str) -> list[int]:
    """Host pids whose command line names the sandbox (its bwrap and start helper)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if sandbox_id.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize(
    "backend", ["bubblewrap", pytest.param("docker", marks=pytest.mark.docker)]
)
def test_a_fork_bomb_times_out_once_and_its_run_ends(
    settings: Settings, tmp_path: Path, backend: str
) -> None:
    if backend == "docker":
        from assay_sandbox_manager.runtime import ensure_image

        ensure_image()
    tag = uuid.uuid4().hex
    tasks, campaign = _campaign(tmp_path, backend)
    server = ScriptedModelServer({"scripted-bomber": _bomber(tag), **judge_scripts()}).start()
    console = Console(record=True, width=200)
    started = time.monotonic()
    try:
        outcome = run_campaign(
            tasks,
            campaign,
            # The run directory's own log under the default names, as `assay run` makes it.
            settings=Settings(home=settings.home, state_dir=settings.state_dir),
            console=console,
            timeout_s=300,
            check=False,
            scripted_server=server,
        )
        took = time.monotonic() - started
        turns = [r for r in server.requests("scripted-bomber") if r.request is not None]
    finally:
        server.stop()
    assert took < 300, f"assay run took {took:.0f} s"

    # The bomb ran once: a retried step would ask the model for turn 0 again.
    assert [r.request.turn for r in turns if r.request][:2] == [0, 1], console.export_text()
    assert sum(1 for r in turns if r.request and r.request.turn == 0) == 1
    step = turns[1].received_at - turns[0].received_at
    assert step < EXEC_TIMEOUT_S + 2, f"the bomb's step took {step:.1f} s"
    result = turns[1].request.tool_results[-1] if turns[1].request else None
    assert result is not None and "(killed: timeout)" in str(result), result

    events = logged_events(outcome.workdir)
    ends = [e["event_type"] for e in events if e["event_type"] in ("AgentFinished", "RunFailed")]
    assert len(ends) == 1, ends
    assert any(e["event_type"] == "ArtifactsSealed" for e in events)

    # Nothing of the sandbox is left: not the bomb, not its bwrap or container.
    [run_id] = {e["run_id"] for e in events if e["event_type"] == "RunRequested"}
    assert tagged_processes(tag) == []
    assert _holding(str(run_id)) == []
    if backend == "docker":
        left = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=assay.run={run_id}"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert left.stdout.strip() == ""
