"""Bring your own agent: a program in the sandbox, its model calls through the run's gateway."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignStarted,
    Event,
    Limits,
    Price,
    ProgramSpec,
    RunFailed,
    SandboxReady,
    SandboxSpec,
)
from assay_testing import pipeline
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

SECRET = "sk-test-never-in-the-sandbox-7c1f"
AGENT = (Path(__file__).parents[2] / "examples" / "agents" / "tiny_agent.py").read_text()
# Everything a program could read the key from: every process's environment and command
# line, and every file it can reach outside the read-only runtime.
# All of it goes to a workspace file that is sealed, so the test reads every byte.
SNOOP = (
    "{ cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline | tr '\\0' '\\n'; "
    "find /workspace /tmp /run -type f -exec cat {} +; env; } > /dev/shm/s 2>&1; "
    "mv /dev/shm/s snoop.txt; echo snooped"
)


def _reach(url: str) -> str:
    code = f"import urllib.request as u; u.urlopen({url!r}, timeout=3)"
    return f"python3 -c {code!r} 2>/dev/null; echo reach=$?"


@pytest.fixture
def scripted() -> Iterator[ScriptedModelServer]:
    with pipeline.scripted_server(key=SECRET) as server:
        yield server
    os.environ[pipeline.SCRIPTED_KEY] = "scripted"


def _program_agent(server: ScriptedModelServer, model: str, **limits: object) -> object:
    program = ProgramSpec(
        command=["python3", "-c", AGENT], answer_file="answer.txt", env={"TINY_AGENT_TURNS": "5"}
    )
    extra: dict[str, object] = {"kind": "program", "program": program}
    if limits:
        extra["limits"] = Limits(**limits)  # type: ignore[arg-type]
    return pipeline.scripted_agent("mine", model, server.openai_base_url, **extra)


async def _run(
    bus: Bus,
    settings: Settings,
    tmp_path: Path,
    agent: object,
    done: type[Event],
    backend: str = "bubblewrap",
) -> list[Event]:
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(
        tmp_path / "tasks", "growth", "max OD?", {"od.csv": "strain,od\nA,0.9\n"}
    )
    extra: dict[str, object] = {}
    if backend == "docker":
        from assay_sandbox_manager.runtime import ensure_image

        sandbox = SandboxSpec(memory_mb=1024, exec_timeout_s=30, cpu_seconds=60)
        extra["sandbox"] = sandbox.model_copy(update={"backend": "docker", "image": ensure_image()})
    prices = {"prog": Price(input_per_mtok=1, output_per_mtok=2)}
    spec = pipeline.campaign("c1", [agent], prices=prices, **extra)
    async with pipeline.services(settings, store, docker=backend == "docker"):
        await pipeline.submit_folder(bus, store, spec, folder, max_bytes=10_000)
        return await pipeline.wait_for_events(
            bus, lambda evs: any(isinstance(e, done) for e in evs)
        )


@pytest.mark.parametrize(
    "backend", ["bubblewrap", pytest.param("docker", marks=pytest.mark.docker)]
)
async def test_program_runs_through_the_gateway_and_is_sealed(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer, backend: str
) -> None:
    host_port = f"http://127.0.0.1:{scripted.port}/v1/models"
    scripted.add_script(
        "prog",
        ScriptedSequence(
            [
                ScriptReply.call("bash", {"command": SNOOP}),
                ScriptReply.call(
                    "bash", {"command": f"{_reach(host_port)}; {_reach('http://1.1.1.1/')}"}
                ),
                ScriptReply.call("submit", {"answer": "A peaks at 0.9"}),
            ]
        ),
    )
    agent = _program_agent(scripted, "prog")
    events = await _run(bus, settings, tmp_path, agent, ArtifactsSealed, backend)
    [ready] = [e for e in events if isinstance(e, SandboxReady)]
    assert ready.backend == backend
    steps = [e for e in events if isinstance(e, AgentStepLogged)]
    assert [s.step for s in steps] == [0, 1, 2]
    assert [s.tool_calls[0].name for s in steps] == ["bash", "bash", "submit"]
    assert all(s.usage.input_tokens > 0 and s.cost_usd > 0 for s in steps)
    assert all(s.request_sha256 and s.response_sha256 for s in steps)
    [finished] = [e for e in events if isinstance(e, AgentFinished)]
    assert (finished.stop_reason, finished.final_message) == ("submitted", "A peaks at 0.9")
    assert finished.cost_usd == pytest.approx(sum(s.cost_usd for s in steps))
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
    sealed_files = {f.path: f for f in sealed.files}
    assert "answer.txt" in sealed_files

    store = LocalBlobStore(settings.blob_dir)
    snoop = store.get_bytes(sealed_files["snoop.txt"].sha256).decode(errors="replace")
    assert "OPENAI_BASE_URL=http://127.0.0.1:18080/v1" in snoop and "tiny research" in snoop
    assert SECRET not in snoop
    assert finished.output_sha256 is not None
    output = store.get_bytes(finished.output_sha256).decode()
    assert "snooped" in output and SECRET not in output
    # Neither the host's scripted server nor any other address is reachable.
    assert output.count("reach=1") == 2, output[-2000:]
    # Upstream got the real key, and the pipeline.campaign's model whatever the program asked.
    recorded = scripted.requests("prog")
    assert len(recorded) == 3
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in recorded)
    assert b'"model": "prog"' in store.get_bytes(steps[0].request_sha256 or "")


async def test_over_limit_call_stops_the_run_with_its_reason(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    scripted.add_script(
        "prog",
        ScriptedSequence(
            [
                ScriptReply.call("bash", {"command": "ls"}),
                ScriptReply.call("submit", {"answer": "never sent"}),
            ]
        ),
    )
    agent = _program_agent(scripted, "prog", max_steps=1)
    events = await _run(bus, settings, tmp_path, agent, AgentFinished)
    [finished] = [e for e in events if isinstance(e, AgentFinished)]
    assert (finished.stop_reason, finished.steps) == ("max_steps", 1)
    assert len(scripted.requests("prog")) == 1
    output = LocalBlobStore(settings.blob_dir).get_bytes(finished.output_sha256 or "")
    assert b"max_steps limit" in output  # the program was told why


async def test_program_exiting_non_zero_is_the_agents_failure(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    program = ProgramSpec(command=["python3", "-c", "import sys; sys.exit('gave up')"])
    agent = pipeline.scripted_agent(
        "mine", "prog", scripted.openai_base_url, kind="program", program=program
    )
    events = await _run(bus, settings, tmp_path, agent, RunFailed)
    [failed] = [e for e in events if isinstance(e, RunFailed)]
    assert failed.stage == "agent" and not failed.infrastructure
    assert "status 1" in failed.error and "gave up" in failed.error


@pytest.mark.parametrize(
    "backend", ["bubblewrap", pytest.param("docker", marks=pytest.mark.docker)]
)
async def test_bundled_program_runs_from_its_read_only_folder(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer, backend: str
) -> None:
    """The agent's code is uploaded with the pipeline.campaign, not installed in the runtime."""
    folder = tmp_path / "my-agent"
    (folder / "data").mkdir(parents=True)
    (folder / "agent.py").write_text(AGENT)
    (folder / "data" / "notes.txt").write_text("bundled notes\n")
    check = (
        "{ cat $ASSAY_AGENT_DIR/data/notes.txt; touch /opt/agent/x 2>/dev/null; "
        "echo touch=$?; echo dir=$ASSAY_AGENT_DIR; } > bundle_check.txt"
    )
    scripted.add_script(
        "prog",
        ScriptedSequence(
            [
                ScriptReply.call("bash", {"command": check}),
                ScriptReply.call("submit", {"answer": "bundled"}),
            ]
        ),
    )
    program = ProgramSpec(
        command=["python3", "/opt/agent/agent.py"], answer_file="answer.txt", bundle=str(folder)
    )
    agent = pipeline.scripted_agent(
        "mine", "prog", scripted.openai_base_url, kind="program", program=program
    )
    events = await _run(bus, settings, tmp_path, agent, ArtifactsSealed, backend)
    [finished] = [e for e in events if isinstance(e, AgentFinished)]
    assert (finished.stop_reason, finished.final_message) == ("submitted", "bundled")
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
    store = LocalBlobStore(settings.blob_dir)
    [check_file] = [f for f in sealed.files if f.path == "bundle_check.txt"]
    assert store.get_bytes(check_file.sha256) == b"bundled notes\ntouch=1\ndir=/opt/agent\n"
    [started] = [e for e in events if isinstance(e, CampaignStarted)]
    stored = started.campaign.agents[0].program
    assert stored is not None and stored.bundle is None and stored.bundle_sha256
    assert store.exists(stored.bundle_sha256)
