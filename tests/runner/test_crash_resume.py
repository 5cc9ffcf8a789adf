"""Kill -9 of the runner mid-run: a restarted runner resumes from the logged steps; a
program agent, which cannot resume, fails cleanly instead of hanging."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.security.controls import ControlsKey, controls_key
from assay.store import LocalBlobStore
from assay.tasks import answer_substance, load_tasks
from assay_aggregator import fold
from assay_report.state import State
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    ControlPlan,
    ControlsSpec,
    Event,
    ProgramSpec,
    RunFailed,
    RunRequested,
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


SLOW_SOLVE = """import time
from pathlib import Path
time.sleep(3)
Path('results').mkdir(exist_ok=True)
Path('results/out.csv').write_text('rows,3\\n')
"""


def _control_mid_run(key: ControlsKey) -> Callable[[list[Event]], bool]:
    """A control (its first step's sealed choice names a plan) past its first step and
    not finished."""

    def check(events: list[Event]) -> bool:
        controls = {
            e.run_id
            for e in events
            if isinstance(e, AgentStepLogged)
            and e.step == 0
            and e.sealed_choice is not None
            and key.open_choice(e.campaign_id, e.run_id or "", e.sealed_choice) is not None
        }
        finished = {e.run_id for e in events if isinstance(e, AgentFinished)}
        return any(
            isinstance(e, AgentStepLogged) and e.step >= 1 and e.run_id in controls - finished
            for e in events
        )

    return check


def _all_sealed(events: list[Event]) -> bool:
    requested = {e.run_id for e in events if isinstance(e, RunRequested)}
    sealed = {e.run_id for e in events if isinstance(e, ArtifactsSealed)}
    return bool(requested) and requested <= sealed


@pytest.mark.slow
async def test_kill_9_mid_control_then_restart_plays_the_plan_its_first_step_chose(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    """Issue #47: a control chooses its plan at its first step and seals the choice there;
    the runner is killed while a control runs its code, and the next runner plays on the
    plan the first step chose: every step once, every run ended once, the answer that
    plan's, and the fold labels the run by it. (Both plans here do the same kind of work,
    so a fresh draw would agree; that a resumed control plays its sealed choice whatever
    the book says now is `test_control_choice.py`'s.)"""
    settings.home.mkdir(parents=True, exist_ok=True)
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(
        tmp_path / "tasks",
        "slow",
        "summarise my counts",
        {
            "counts.csv": "g,c\na,1\nb,2\nc,3\n",
            "reference/solve.py": SLOW_SOLVE,
            "reference/results/out.csv": "rows,3\n",
            "reference/message.md": "The mean count is 2.0 (SD 1.0, n = 3); see results/out.csv.\n",
        },
    )
    drafts = load_tasks(folder, max_bytes=10_000)
    agent = pipeline.scripted_agent("steady", "steady", scripted.openai_base_url)
    # Both plans run the slow script: whichever a control chose, it is mid-run a while.
    spec = pipeline.campaign(
        "crashc",
        [agent],
        controls=ControlsSpec(variants=["reference", "altered_numbers"], epochs=2),
    )
    key = controls_key(settings)
    async with pipeline.services(settings, store, names=("sandbox-manager",)):
        async with pipeline.service_process("runner", settings) as first:
            await submit_campaign(bus, store, spec, drafts)
            await pipeline.wait_for_events(bus, _control_mid_run(key), timeout=180)
            os.killpg(first.pid, signal.SIGKILL)
            await first.wait()
        async with pipeline.service_process("runner", settings):
            events = await pipeline.wait_for_events(bus, _all_sealed, timeout=150)
    state = fold(enumerate(events, 1), State(controls_key=key))
    assert len(state.controls) == 4  # reference and altered numbers, two epochs each
    steps = Counter((e.run_id, e.step) for e in events if isinstance(e, AgentStepLogged))
    assert set(steps.values()) == {1}, "every step of every run logged once"
    ends = Counter(e.run_id for e in events if isinstance(e, AgentFinished | RunFailed))
    assert set(ends.values()) == {1} and len(ends) == 5, ends  # the agent's run and four
    answers = {e.run_id: e.final_message for e in events if isinstance(e, AgentFinished)}
    for c in state.controls.values():
        run = state.runs[c.run_id]
        assert run.chosen_plan and run.control_plan == run.chosen_plan
        plan = ControlPlan.model_validate_json(store.get_bytes(run.chosen_plan))
        assert answer_substance(answers[c.run_id]) == answer_substance(plan.message), c.run_id
