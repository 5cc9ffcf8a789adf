"""Kill -9 of the runner mid-run: a restarted runner resumes from the logged steps; a
program agent, which cannot resume, fails cleanly instead of hanging."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    Event,
    ProgramSpec,
    RunFailed,
)
from assay_testing import pipeline
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

STEPS = [
    ScriptReply.call("bash", {"command": "mkdir -p results && wc -l counts.csv"}),
    ScriptReply.call(
        "write_file",
        {
            "path": "analysis.py",
            "content": "import pandas as pd\nd = pd.read_csv('counts.csv')\nd.describe().to_csv('results/summary.csv')\nprint(len(d))\n",
        },
    ),
    ScriptReply.call("bash", {"command": "python3 analysis.py"}),
    ScriptReply.call("bash", {"command": "echo 'n=3' > results/notes.txt"}),
    ScriptReply.call("python", {"code": "print(open('results/summary.csv').read())"}),
    ScriptReply.call(
        "submit", {"answer": "Summary in results/summary.csv; notes in results/notes.txt."}
    ),
]


@pytest.fixture
def scripted() -> Iterator[ScriptedModelServer]:
    with pipeline.scripted_server({"steady": ScriptedSequence(STEPS)}) as server:
        server.set_latency("steady", 0.3)
        yield server


def sealed_in(campaign_id: str):  # type: ignore[no-untyped-def]
    def check(events: list[Event]) -> bool:
        return any(isinstance(e, ArtifactsSealed) and e.campaign_id == campaign_id for e in events)

    return check


@pytest.mark.slow
async def test_kill_9_at_step_k_then_restart_completes_exactly_once(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(
        tmp_path / "tasks", "counts", "summarise my counts", {"counts.csv": "g,c\na,1\nb,2\nc,3\n"}
    )
    drafts = load_tasks(folder, max_bytes=10_000)
    agent = pipeline.scripted_agent("steady", "steady", scripted.openai_base_url)
    async with pipeline.services(settings, store, names=("sandbox-manager",)):
        # The undisturbed reference run.
        async with pipeline.service_process("runner", settings):
            await submit_campaign(bus, store, pipeline.campaign("calm", [agent]), drafts)
            calm = await pipeline.wait_for_events(bus, sealed_in("calm"), timeout=120)
        # The disturbed run: SIGKILL once step 2 is logged, then a fresh runner.
        async with pipeline.service_process("runner", settings) as first:
            await submit_campaign(bus, store, pipeline.campaign("crash", [agent]), drafts)
            await pipeline.wait_for_events(
                bus,
                lambda evs: any(
                    isinstance(e, AgentStepLogged) and e.campaign_id == "crash" and e.step == 2
                    for e in evs
                ),
            )
            os.killpg(first.pid, signal.SIGKILL)
            await first.wait()
        async with pipeline.service_process("runner", settings):
            events = await pipeline.wait_for_events(bus, sealed_in("crash"), timeout=120)
    crash_steps = [e for e in events if isinstance(e, AgentStepLogged) and e.campaign_id == "crash"]
    assert Counter(s.step for s in crash_steps) == {i: 1 for i in range(len(STEPS))}
    [crash_done] = [e for e in events if isinstance(e, AgentFinished) and e.campaign_id == "crash"]
    [calm_done] = [e for e in calm if isinstance(e, AgentFinished) and e.campaign_id == "calm"]
    assert (
        crash_done.final_message == calm_done.final_message
        and crash_done.stop_reason == "submitted"
    )
    [crash_seal] = [
        e for e in events if isinstance(e, ArtifactsSealed) and e.campaign_id == "crash"
    ]
    [calm_seal] = [e for e in calm if isinstance(e, ArtifactsSealed) and e.campaign_id == "calm"]
    assert {(f.path, f.sha256) for f in crash_seal.files} == {
        (f.path, f.sha256) for f in calm_seal.files
    }
    assert {f.path for f in crash_seal.files} >= {
        "results/summary.csv",
        "results/notes.txt",
        "analysis.py",
    }
    await asyncio.sleep(0)


TINY_AGENT = (Path(__file__).parents[2] / "examples" / "agents" / "tiny_agent.py").read_text()


async def test_kill_9_mid_program_then_restart_fails_the_run_cleanly(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    """The program outlives its runner (it sleeps in a tool, deaf to the gateway's death):
    the next runner must neither wait for it nor run it twice."""
    settings.home.mkdir(parents=True, exist_ok=True)
    store = LocalBlobStore(settings.blob_dir)
    scripted.add_script(
        "deaf",
        ScriptedSequence(
            [
                ScriptReply.call("bash", {"command": "echo started > started.txt; sleep 300"}),
                ScriptReply.call("submit", {"answer": "never"}),
            ]
        ),
    )
    program = ProgramSpec(command=["python3", "-c", TINY_AGENT], answer_file="answer.txt")
    agent = pipeline.scripted_agent(
        "mine", "deaf", scripted.openai_base_url, kind="program", program=program
    )
    folder = pipeline.write_task(
        tmp_path / "tasks", "counts", "summarise", {"counts.csv": "g,c\na,1\n"}
    )
    drafts = load_tasks(folder, max_bytes=10_000)
    async with pipeline.services(settings, store, names=("sandbox-manager",)) as running:
        async with pipeline.service_process("runner", settings) as first:
            await submit_campaign(bus, store, pipeline.campaign("crash", [agent]), drafts)
            await pipeline.wait_for_events(
                bus, lambda evs: any(isinstance(e, AgentStepLogged) for e in evs)
            )
            os.killpg(first.pid, signal.SIGKILL)
            await first.wait()
        async with pipeline.service_process("runner", settings):
            events = await pipeline.wait_for_events(bus, sealed_in("crash"), timeout=60)
        backend = running["sandbox-manager"].backends["bubblewrap"]
        assert backend.list_live() == []  # the orphan program went with its sandbox
    [failed] = [e for e in events if isinstance(e, RunFailed)]
    assert (failed.stage, failed.infrastructure) == ("agent", True)
    assert "runner restarted" in failed.error and "cannot resume" in failed.error
    assert not any(isinstance(e, AgentFinished) for e in events)
    # The program ran once: one model call, and nobody started it again.
    assert [e.step for e in events if isinstance(e, AgentStepLogged)] == [0]
    assert len(scripted.requests("deaf")) == 1
