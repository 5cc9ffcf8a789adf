"""Events as the services write them, with the defaults most tests share (campaign c1,
task t1, agent a1 on model m, epoch 0): a test names only what it is about."""

from __future__ import annotations

from assay_schemas import (
    AgentSpec,
    CampaignSpec,
    CampaignStarted,
    Limits,
    Producer,
    RunRequested,
    SandboxReady,
    SandboxSpec,
    Task,
    TaskSubmitted,
    same_run,
)

__all__ = [
    "TEST_PRODUCER",
    "campaign_started",
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
