"""Scheduling: a campaign and a task become one RunRequested per (agent, epoch)."""

from __future__ import annotations

from assay_schemas import CampaignSpec, Producer, RunRequested, Task, new_event, run_id_for

__all__ = ["plan_runs"]


def plan_runs(
    campaign: CampaignSpec, task: Task, *, producer: Producer, cause: str
) -> list[RunRequested]:
    """Every run a task needs in a campaign; ids are deterministic, so replanning is a no-op."""
    runs = []
    for agent in campaign.agents:
        for epoch in range(campaign.epochs):
            run_id = run_id_for(campaign.campaign_id, task.task_id, agent.agent_id, epoch)
            runs.append(
                new_event(
                    RunRequested,
                    key=(run_id,),
                    campaign_id=campaign.campaign_id,
                    run_id=run_id,
                    task_id=task.task_id,
                    causation_id=cause,
                    task=task,
                    agent=agent,
                    epoch=epoch,
                    limits=agent.limits or campaign.limits,
                    sandbox=campaign.sandbox,
                    scripted=campaign.scripted,
                    prices=campaign.prices,
                    producer=producer,
                )
            )
    return runs
