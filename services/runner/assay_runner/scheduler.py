"""Scheduling: a campaign and a task become one RunRequested per (agent, epoch), and one
per declared control run, interleaved among them where its declaration says."""

from __future__ import annotations

import secrets
from pathlib import Path

from assay_schemas import (
    AgentSpec,
    AssayError,
    CampaignSpec,
    ControlDetails,
    Producer,
    RunRequested,
    SandboxSpec,
    Task,
    expected_runs,
    run_id_for,
)

__all__ = ["ControlsUnopened", "control_agents", "control_runs", "interleave", "plan_runs"]


def plan_runs(
    campaign: CampaignSpec,
    task: Task,
    *,
    producer: Producer,
    cause: str,
    gateway_root: Path | None = None,
    control_agents: frozenset[str] = frozenset(),
) -> list[RunRequested]:
    """Every run a task needs in a campaign; ids are deterministic, so replanning is a no-op.
    The roster's `control_agents` (listed like agents, see `assay.controls`) run only
    their declared runs (`control_runs`), never as agents.

    A program agent's run gets a gateway folder under gateway_root, its name unguessable
    (the folder is traversable by sandbox uids, so a name is all that guards the socket),
    and its sandbox the program's runtime extension (its packages) and bundle.
    """
    runs = []
    for agent, epoch, _ in expected_runs(campaign, task.task_id, skip=control_agents):
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
        runs.append(_request(campaign, task, agent, epoch, sandbox, producer, cause))
    return runs


def _request(
    campaign: CampaignSpec,
    task: Task,
    agent: AgentSpec,
    epoch: int,
    sandbox: SandboxSpec,
    producer: Producer,
    cause: str,
) -> RunRequested:
    """One run's request: what every request of the campaign shares, for this agent."""
    run_id = run_id_for(campaign.campaign_id, task.task_id, agent.agent_id, epoch)
    return RunRequested(
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
        cache=campaign.cache,
        producer=producer,
    )


class ControlsUnopened(AssayError):
    """The campaign lists more control agents than this runner's declarations name (they
    did not open: no controls key, or another deployment's): it cannot tell which of the
    roster's agents to run, so it runs none of the task's."""


def control_agents(campaign: CampaignSpec, declared: list[ControlDetails]) -> frozenset[str]:
    """The roster's control agents, by the opened declarations; :class:`ControlsUnopened`
    when the campaign says it has more (running one as an agent would call its model)."""
    known = frozenset(d.agent_id for d in declared)
    listed = campaign.controls.agents if campaign.controls else 0
    if len(known) < listed:
        raise ControlsUnopened(
            f"campaign {campaign.campaign_id}: {listed} control agents listed, {len(known)} "
            "opened (is ASSAY_CONTROLS_SECRET, or the home's keys/controls.secret, the submitter's?)"
        )
    return known


def _looks(campaign: CampaignSpec, declared: ControlDetails) -> AgentSpec:
    """The control agent's spec: the campaign agent's it looks like, under its own id."""
    like = next((a for a in campaign.agents if a.agent_id == declared.like), None)
    if like is None or like.kind != "model":
        return AgentSpec(agent_id=declared.agent_id, model="control")
    return like.model_copy(update={"agent_id": declared.agent_id})


def control_runs(
    campaign: CampaignSpec,
    task: Task,
    declared: list[ControlDetails],
    *,
    producer: Producer,
    cause: str,
) -> list[tuple[int, RunRequested]]:
    """Each declared control of `task` (those naming their agent) as (slot, request): an
    ordinary request of the agent it looks like, nothing in it marks a control."""
    out = []
    for d in declared:
        if d.task_id != task.task_id:
            continue
        agent = _looks(campaign, d)
        run_id = run_id_for(campaign.campaign_id, task.task_id, agent.agent_id, d.epoch)
        if run_id != d.control_run_id:
            continue  # a declaration that names another run requests nothing
        request = _request(campaign, task, agent, d.epoch, campaign.sandbox, producer, cause)
        out.append((d.slot, request))
    return out


def interleave(
    runs: list[RunRequested], controls: list[tuple[int, RunRequested]]
) -> list[RunRequested]:
    """`runs` in their order with each control at its slot (past the end: last)."""
    merged = list(runs)
    for slot, request in sorted(controls, key=lambda c: (c[0], c[1].run_id or "")):
        merged.insert(min(slot, len(merged)), request)
    return merged
