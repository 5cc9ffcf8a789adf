"""RunHistory: one run's events folded into where the run is and what it holds."""

from __future__ import annotations

from typing import Any

import pytest

from assay_schemas import (
    AgentFinished,
    AgentSpec,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignSpec,
    Event,
    FileRef,
    JudgmentFailed,
    JudgmentRecorded,
    Limits,
    Producer,
    RunFailed,
    RunHistory,
    RunOutcome,
    RunRequested,
    SampleKey,
    SandboxReady,
    SandboxSpec,
    Task,
    Usage,
)
from assay_testing.events import campaign_started

PRODUCER = Producer(service="test", version="0")
RUN = {"campaign_id": "c1", "run_id": "r1", "task_id": "t1", "producer": PRODUCER}


def _event(cls: type[Event], key: tuple[object, ...], **fields: Any) -> Any:
    return cls(event_id=cls.id_for(*key), **RUN, **fields)


def requested(agent: str = "a1") -> RunRequested:
    return _event(
        RunRequested,
        ("r1", agent),
        task=Task(task_id="t1", prompt="p"),
        agent=AgentSpec(agent_id=agent, model="m"),
        epoch=0,
        limits=Limits(),
        sandbox=SandboxSpec(),
    )


def ready(sandbox_id: str = "s1") -> SandboxReady:
    return _event(
        SandboxReady,
        ("r1", sandbox_id),
        sandbox_id=sandbox_id,
        backend="bubblewrap",
        instance="i1",
        image_digest="d",
        workspace=[],
    )


def step(n: int, text: str = "") -> AgentStepLogged:
    return _event(AgentStepLogged, ("r1", n, text), step=n, model_output=text)


def finished(reason: str = "submitted") -> AgentFinished:
    return _event(
        AgentFinished,
        ("r1", reason),
        stop_reason=reason,
        final_message="done",
        steps=2,
        usage=Usage(),
    )


def failed(stage: str, *, infrastructure: bool = True) -> RunFailed:
    return _event(RunFailed, ("r1", stage), stage=stage, error="e", infrastructure=infrastructure)


def sealed(*paths: str) -> ArtifactsSealed:
    files = [FileRef(path=p, sha256="0" * 64, size=1) for p in paths]
    return _event(ArtifactsSealed, ("r1", *paths), files=files, agent_id="a1", epoch=0)


def recorded(judge: str, sample: int, rationale: str = "") -> JudgmentRecorded:
    return _event(
        JudgmentRecorded,
        ("r1", judge, sample, rationale),
        judge_id=judge,
        sample=sample,
        rubric_id="default",
        rubric_version=1,
        rationale=rationale,
    )


def judgment_failed(judge: str, sample: int) -> JudgmentFailed:
    return _event(
        JudgmentFailed,
        ("r1", judge, sample),
        judge_id=judge,
        sample=sample,
        error="no verdict",
        attempts=3,
    )


def test_an_empty_history_knows_nothing() -> None:
    history = RunHistory.fold([])
    assert history.stage == "unknown"
    assert history.task is None and history.request is None and history.steps == []
    assert not history.infrastructure_failure
    assert history.samples_done("j1") == set()


@pytest.mark.parametrize(
    ("events", "stage"),
    [
        ([requested()], "requested"),
        ([requested(), ready()], "running"),
        ([requested(), ready(), step(0)], "running"),
        ([requested(), ready(), step(0), finished()], "finished"),
        ([requested(), failed("sandbox")], "failed"),
        ([requested(), ready(), failed("agent")], "failed"),
        ([requested(), ready(), finished(), sealed("a.txt")], "sealed"),
        # The files are evidence; the run still failed (issue #54, case 2).
        ([requested(), ready(), failed("agent"), sealed()], "failed"),
        ([requested(), ready(), finished(), failed("seal")], "failed"),  # its seal lost
        ([requested(), ready(), finished(), sealed("a.txt"), recorded("j1", 0)], "sealed"),
        ([sealed("a.txt")], "sealed"),  # a seal published without its request
    ],
)
def test_stage_says_where_the_run_is(events: list[Event], stage: str) -> None:
    assert RunHistory.fold(events).stage == stage


def test_phases_keep_the_first_event_logged() -> None:
    history = RunHistory.fold(
        [
            requested("a1"),
            requested("a2"),
            ready("s1"),
            ready("s2"),
            finished(),
            failed("seal"),
            finished("max_steps"),
        ]
    )
    assert history.request is not None and history.request.agent.agent_id == "a1"
    assert history.task == Task(task_id="t1", prompt="p")
    assert history.sandbox is not None and history.sandbox.sandbox_id == "s1"
    assert history.finish is not None and history.finish.stop_reason == "submitted"
    assert history.ended is history.finish
    assert [f.stage for f in history.failures] == ["seal"]


def test_a_failure_before_the_agent_finished_ends_the_run() -> None:
    late = finished()
    history = RunHistory.fold([requested(), failed("sandbox"), late])
    assert isinstance(history.ended, RunFailed) and history.ended.stage == "sandbox"
    assert history.finish is None and history.refused == [late]
    assert history.outcome == RunOutcome("failed", "sandbox", "e", True)


def test_a_second_end_is_refused_and_the_first_stands() -> None:
    again, crash = finished("max_steps"), failed("agent")
    history = RunHistory.fold([requested(), ready(), finished(), again, crash])
    assert history.finish is not None and history.finish.stop_reason == "submitted"
    assert history.refused == [again, crash] and history.failures == []
    assert history.stage == "finished" and history.outcome is None


def test_steps_are_ordered_and_a_step_logged_twice_counts_once_the_last() -> None:
    history = RunHistory.fold([step(1, "b"), step(0, "a"), step(1, "b again"), step(2, "c")])
    assert [(s.step, s.model_output) for s in history.steps] == [
        (0, "a"),
        (1, "b again"),
        (2, "c"),
    ]


def test_the_last_seal_and_the_last_verdict_per_sample_win() -> None:
    history = RunHistory.fold(
        [
            sealed("a.txt"),
            sealed("b.txt"),
            recorded("j1", 0, "old"),
            recorded("j1", 0, "new"),
            recorded("j1", 1),
            recorded("j2", 0),
        ]
    )
    assert history.seal is not None and [f.path for f in history.seal.files] == ["b.txt"]
    assert history.verdicts[SampleKey("j1", 0)].rationale == "new"
    assert sorted(history.verdicts) == [("j1", 0), ("j1", 1), ("j2", 0)]


def test_samples_done_count_verdicts_and_failures_of_that_judge_only() -> None:
    history = RunHistory.fold(
        [recorded("j1", 0), judgment_failed("j1", 2), recorded("j2", 1), judgment_failed("j2", 0)]
    )
    assert history.samples_done("j1") == {0, 2}
    assert history.samples_done("j2") == {0, 1}
    assert history.samples_done("j3") == set()
    assert list(history.judgment_failures) == [SampleKey("j1", 2), SampleKey("j2", 0)]


@pytest.mark.parametrize(
    ("events", "infrastructure"),
    [
        ([requested(), failed("sandbox")], True),
        ([requested(), failed("agent", infrastructure=False)], False),
        # Sealed afterwards: the files are evidence, the platform still failed the run.
        ([requested(), ready(), failed("agent"), sealed()], True),
        ([requested(), ready(), failed("agent", infrastructure=False), sealed()], False),
        ([requested(), ready(), finished()], False),
        # The first failure decides: a seal lost after an agent's failure is not the cause.
        ([requested(), ready(), failed("agent", infrastructure=False), failed("seal")], False),
    ],
)
def test_infrastructure_failures_are_the_deciding_failure(
    events: list[Event], infrastructure: bool
) -> None:
    assert RunHistory.fold(events).infrastructure_failure is infrastructure


def test_apply_folds_one_event_at_a_time_and_twice_changes_nothing() -> None:
    events = [
        requested(),
        ready(),
        step(0),
        failed("agent"),
        sealed("a.txt"),
        recorded("j1", 0),
        judgment_failed("j1", 1),
    ]
    history = RunHistory()
    for event in events:
        history.apply(event)
        history.apply(event)
    assert history == RunHistory.fold(events)
    assert len(history.failures) == 1 and len(history.steps) == 1


def test_events_about_no_run_are_ignored() -> None:
    campaign = CampaignSpec(campaign_id="c1", agents=[AgentSpec(agent_id="a1", model="m")])
    start = campaign_started(campaign, producer=PRODUCER)
    assert RunHistory.fold([start]) == RunHistory()
