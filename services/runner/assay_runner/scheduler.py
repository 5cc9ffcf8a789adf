"""Scheduling: a campaign and a task become one RunRequested per (agent, epoch)."""

from __future__ import annotations

import secrets
from pathlib import Path

from assay_schemas import CampaignSpec, Producer, RunRequested, Task, run_id_for

__all__ = ["plan_runs"]


def plan_runs(
    campaign: CampaignSpec,
    task: Task,
    *,
    producer: Producer,
    cause: str,
    gateway_root: Path | None = None,
) -> list[RunRequested]:
    """Every run a task needs in a campaign; ids are deterministic, so replanning is a no-op.

    A program agent's run gets a gateway folder under gateway_root, its name unguessable
    (the folder is traversable by sandbox uids, so a name is all that guards the socket),
    and its sandbox the program's runtime extension (its packages) and bundle.
    """
    runs = []
    for agent in campaign.agents:
        for epoch in range(campaign.epochs):
            run_id = run_id_for(campaign.campaign_id, task.task_id, agent.agent_id, epoch)
            sandbox = campaign.sandbox
            if agent.program is not None:
                if gateway_root is None:
                    raise ValueError(f"agent {agent.agent_id}: program agents need a gateway root")
                folder = gateway_root / secrets.token_hex(12)  # short: AF_UNIX paths
                sandbox = sandbox.model_copy(
                    update={
                        "gateway_dir": str(folder),
                        "packages": agent.program.packages,
                        "bundle_sha256": agent.program.bundle_sha256,
                    }
                )
            runs.append(
                RunRequested(
                    event_id=RunRequested.id_for(run_id),
                    campaign_id=campaign.campaign_id,
                    run_id=run_id,
                    task_id=task.task_id,
                    causation_id=cause,
                    task=task,
                    agent=agent,
                    epoch=epoch,
                    limits=agent.limits or campaign.limits,
                    sandbox=sandbox,
                    scripted=campaign.scripted,
                    prices=campaign.prices,
                    web=campaign.web,
                    producer=producer,
                )
            )
    return runs
