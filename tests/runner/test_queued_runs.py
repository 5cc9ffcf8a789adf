"""Runs queued behind others: a run's wall clock is its own, not the queue's.

A campaign's runs are all requested when its tasks are admitted and their sandboxes are
made ahead (the warm pool), while the runners drive only as many at once as their
concurrency. A run waiting its turn had its wall clock counted from its SandboxReady: at
concurrency 1 the runs behind the first few met their `wall_clock_s` before their first
step (a model run stopped at once as `wall_clock`; a program was killed a second after it
started), so a campaign's later runs were cut short by where they stood in the queue.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    Event,
    Limits,
    ProgramSpec,
    RunFailed,
    SandboxReady,
)
from assay_testing import pipeline
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

AGENT = (Path(__file__).parents[2] / "examples" / "agents" / "tiny_agent.py").read_text()
RUNS = 6
WALL_CLOCK_S = 2.5
LATENCY_S = 0.3
"""Each run takes about three model calls of 0.3 s: the runs behind the third wait longer
than their whole wall clock."""


def _ended(events: list[Event]) -> bool:
    done = {e.run_id for e in events if isinstance(e, ArtifactsSealed | RunFailed)}
    return len(done) >= RUNS


async def _campaign(
    bus: Bus, settings: Settings, tmp_path: Path, agent: object, **extra: object
) -> list[Event]:
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(tmp_path / "tasks", "t1", "count the rows", {"d.csv": "x\n1\n"})
    spec = pipeline.campaign("c1", [agent], epochs=RUNS, **extra)  # type: ignore[list-item]
    one_at_a_time = settings.model_copy(update={"runner_concurrency": 1})
    async with pipeline.services(one_at_a_time, store):
        await pipeline.submit_folder(bus, store, spec, folder)
        return await pipeline.wait_for_events(bus, _ended, timeout=120)


def _waited(events: list[Event]) -> float:
    """The longest a run's sandbox waited for the run's work to begin (its first model
    call, or its end where it made none): the queue."""
    ready = {e.run_id: e.occurred_at for e in events if isinstance(e, SandboxReady)}
    began = {}
    for e in reversed(events):
        if isinstance(e, AgentStepLogged) and e.step == 0:
            began[e.run_id] = e.occurred_at - timedelta(milliseconds=e.latency_ms)
        elif isinstance(e, AgentFinished | RunFailed) and e.run_id not in began:
            began[e.run_id] = e.occurred_at
    return max((began[r] - at).total_seconds() for r, at in ready.items() if r in began)


def _three_slow_steps(scripted: ScriptedModelServer, model: str) -> None:
    """Two commands and an answer, each model call taking `LATENCY_S`."""
    two = [ScriptReply.call("bash", {"command": "echo step"})] * 2
    scripted.add_script(
        model, ScriptedSequence([*two, ScriptReply.call("submit", {"answer": "1"})])
    )
    scripted.set_latency(model, LATENCY_S)


async def test_a_model_run_queued_behind_others_gets_its_whole_wall_clock(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    _three_slow_steps(scripted, "q")
    agent = pipeline.scripted_agent("a1", "q", scripted.openai_base_url)
    events = await _campaign(
        bus, settings, tmp_path, agent, limits=Limits(wall_clock_s=WALL_CLOCK_S, tool_timeout_s=20)
    )
    assert _waited(events) > WALL_CLOCK_S, "the test's queue must outlast a wall clock"
    finished = [e for e in events if isinstance(e, AgentFinished)]
    assert len(finished) == RUNS
    assert {(f.stop_reason, f.steps) for f in finished} == {("submitted", 3)}
    # A run's duration is its own work, never its wait in the queue.
    assert all(f.duration_s < WALL_CLOCK_S for f in finished)


async def test_a_program_run_queued_behind_others_gets_its_whole_wall_clock(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    _three_slow_steps(scripted, "p")
    program = ProgramSpec(
        command=["python3", "-c", AGENT], answer_file="answer.txt", env={"TINY_AGENT_TURNS": "5"}
    )
    agent = pipeline.scripted_agent(
        "mine",
        "p",
        scripted.openai_base_url,
        kind="program",
        program=program,
        limits=Limits(wall_clock_s=WALL_CLOCK_S, tool_timeout_s=20),
    )
    events = await _campaign(bus, settings, tmp_path, agent)
    assert _waited(events) > WALL_CLOCK_S, "the test's queue must outlast a wall clock"
    assert not [e.error for e in events if isinstance(e, RunFailed)]
    finished = [e for e in events if isinstance(e, AgentFinished)]
    assert len(finished) == RUNS
    assert {(f.stop_reason, f.steps) for f in finished} == {("submitted", 3)}


async def test_a_queue_at_concurrency_one_waits_as_messages_not_as_idle_sandboxes(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    """With a warm pool of one, no more than one sandbox waits for the runner beyond the
    run it drives, whatever the queue: read from the log, at every event."""
    scripted.add_script("w", ScriptedSequence([ScriptReply.call("submit", {"answer": "1"})]))
    agent = pipeline.scripted_agent("a1", "w", scripted.openai_base_url)
    pooled = settings.model_copy(update={"sandbox_warm": 1})
    events = await _campaign(bus, pooled, tmp_path, agent)
    assert sum(isinstance(e, AgentFinished) for e in events) == RUNS
    waiting: set[str | None] = set()
    most = 0
    for e in events:
        if isinstance(e, SandboxReady):
            waiting.add(e.run_id)
        elif isinstance(e, AgentStepLogged | AgentFinished | RunFailed):
            waiting.discard(e.run_id)
        most = max(most, len(waiting))
    # The run the runner took (claimed, its first step not yet logged) and one made ahead.
    assert most <= 2, most
