"""Events as the services write them, with the defaults most tests share (campaign c1,
task t1, agent a1 on model m, epoch 0): a test names only what it is about."""

from __future__ import annotations

from typing import Any

from assay_schemas import (
    AgentSpec,
    CampaignSpec,
    CampaignStarted,
    DimensionScore,
    Event,
    JudgmentFailed,
    JudgmentRecorded,
    Limits,
    Producer,
    RunRequested,
    SandboxReady,
    SandboxSpec,
    Task,
    TaskSubmitted,
    default_rubric,
    same_run,
)

__all__ = [
    "TEST_PRODUCER",
    "campaign_started",
    "judgment_failed",
    "judgment_recorded",
    "run_requested",
    "sandbox_ready",
    "task_submitted",
]

TEST_PRODUCER = Producer(service="test", version="0")


def run_requested(
    run_id: str = "r1",
    *,
    campaign_id: str = "c1",
    task: Task | None = None,
    agent: AgentSpec | None = None,
    limits: Limits | None = None,
    sandbox: SandboxSpec | None = None,
    producer: Producer = TEST_PRODUCER,
    event_id: str | None = None,
) -> RunRequested:
    """A request for run `run_id`, epoch 0, of task t1 (prompt "p") by agent a1."""
    task = task or Task(task_id="t1", prompt="p")
    return RunRequested(
        event_id=event_id or RunRequested.id_for(run_id),
        campaign_id=campaign_id,
        run_id=run_id,
        task_id=task.task_id,
        task=task,
        agent=agent or AgentSpec(agent_id="a1", model="m"),
        epoch=0,
        limits=limits or Limits(),
        sandbox=sandbox or SandboxSpec(),
        producer=producer,
    )


def sandbox_ready(
    request: RunRequested,
    *,
    sandbox_id: str | None = None,
    instance: str = "vm",
    producer: Producer = TEST_PRODUCER,
    event_id: str | None = None,
) -> SandboxReady:
    """The sandbox-manager's answer to `request`: a bubblewrap sandbox on `instance`."""
    run_id = request.run_id or ""
    return SandboxReady(
        event_id=event_id or SandboxReady.id_for(run_id),
        **same_run(request),
        sandbox_id=sandbox_id or run_id,
        backend="bubblewrap",
        instance=instance,
        image_digest="d",
        workspace=[],
        producer=producer,
    )


def campaign_started(spec: CampaignSpec, *, producer: Producer = TEST_PRODUCER) -> CampaignStarted:
    """The event that starts campaign `spec` (its id from the campaign's id alone)."""
    return CampaignStarted(
        event_id=CampaignStarted.id_for(spec.campaign_id),
        campaign_id=spec.campaign_id,
        campaign=spec,
        producer=producer,
    )


def task_submitted(
    campaign_id: str, task: Task, *, producer: Producer = TEST_PRODUCER
) -> TaskSubmitted:
    """`task` submitted to campaign `campaign_id` (its id from the task's id)."""
    return TaskSubmitted(
        event_id=TaskSubmitted.id_for(task.task_id),
        campaign_id=campaign_id,
        task_id=task.task_id,
        task=task,
        producer=producer,
    )


def judgment_failed(
    about: Event,
    judge_id: str,
    sample: int,
    *,
    event_id: str,
    error: str = "x",
    attempts: int = 1,
    producer: Producer | None = None,
    **extra: Any,
) -> JudgmentFailed:
    """Judge `judge_id` gave up on `sample` of the run `about` names (its producer's by
    default); `extra` sets the other fields (error_info, infrastructure)."""
    return JudgmentFailed(
        event_id=event_id,
        campaign_id=about.campaign_id,
        run_id=about.run_id,
        task_id=about.task_id,
        producer=producer or about.producer,
        judge_id=judge_id,
        sample=sample,
        error=error,
        attempts=attempts,
        **extra,
    )


def judgment_recorded(
    about: Event,
    judge_id: str,
    score: int,
    *,
    family: str = "f",
    model: str = "m",
    producer: Producer = TEST_PRODUCER,
) -> JudgmentRecorded:
    """Judge `judge_id`'s verdict on sample 0 of the run `about` names: every dimension of
    the default rubric scored `score`."""
    run_id = about.run_id or ""
    return JudgmentRecorded(
        event_id=JudgmentRecorded.id_for(run_id, judge_id, 0),
        campaign_id=about.campaign_id,
        run_id=run_id,
        task_id=about.task_id,
        judge_id=judge_id,
        judge_family=family,
        judge_model=model,
        sample=0,
        rubric_id="assay-default",
        rubric_version=1,
        scores={d: DimensionScore(score=score) for d in default_rubric().dimension_keys},
        producer=producer,
    )
