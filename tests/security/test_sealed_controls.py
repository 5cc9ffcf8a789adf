"""Issue #47: a judge's NATS user replays the whole log and tries to tell the controls.

The bundled campaign (two of its tasks, controls on) is submitted as the CLI's user and
its runs requested as the runner's user, the way the runner requests them; then the
judge's user (a real nats-server with the rendered permissions) reads every event and
tries each route in `tests.security.unblind`. On the code before the declarations were
sealed, `linked_by_declarations` named every control run (its ``control_run_id`` and
``agent_id`` were in clear, its id ``derive_id("ControlDeclared", run_id)``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.bus import Bus, read_raw
from assay.campaign import load_campaign, submit_campaign
from assay.security.controls import controls_key
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_runner.scheduler import control_agents, control_runs, interleave, plan_runs
from assay_schemas import (
    CampaignSpec,
    CampaignStarted,
    ControlDeclared,
    ControlDetails,
    Event,
    Producer,
    RunRequested,
    Task,
    parse_event,
)

from .conftest import SecureNats
from .stack import connected
from .unblind import linked_by_declarations, linked_by_roster

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("qpcr_ddct", "survey_paired")
P = Producer(service="test", version="0")


async def _submitted(
    secure: SecureNats, tmp_path: Path
) -> tuple[list[Task], CampaignSpec, list[ControlDetails]]:
    """The campaign as `assay run` submits it (as the CLI's user): its tasks, the campaign
    as published (its roster) and its declarations, opened."""
    campaign = load_campaign(ROOT / "examples" / "campaign.yaml")
    drafts = [
        d
        for d in load_tasks(ROOT / "examples" / "tasks", max_bytes=5_000_000)
        if d.task_id in TASKS
    ]
    store = LocalBlobStore(tmp_path / "blobs")
    cli = await connected(secure.settings("cli"), "cli")
    try:
        tasks = await submit_campaign(cli, store, campaign, drafts)
        key = controls_key(cli.settings)
        logged = [e.event async for e in cli.replay(subject=cli.subjects.events)]
    finally:
        await cli.stop()
    (started,) = [e for e in logged if isinstance(e, CampaignStarted)]
    declared = [key.open(e) for e in logged if isinstance(e, ControlDeclared)]
    return tasks, started.campaign, declared


async def _requested(
    secure: SecureNats, tasks: list[Task], campaign: CampaignSpec, declared: list[ControlDetails]
) -> set[str]:
    """Every run requested as the runner requests them (as its user); the control runs."""
    runner = await connected(secure.settings("runner"), "runner")
    skip = control_agents(campaign, declared)
    controls: set[str] = set()
    try:
        for task in tasks:
            ours = control_runs(campaign, task, declared, producer=runner.producer, cause="c")
            controls |= {r.run_id or "" for _, r in ours}
            agents = plan_runs(
                campaign, task, producer=runner.producer, cause="c", control_agents=skip
            )
            for request in interleave(agents, ours):
                await runner.publish(request)
    finally:
        await runner.stop()
    return controls


async def _judges_view(secure: SecureNats) -> list[tuple[str, Event]]:
    """The whole log as the judge's user replays it: (subject, event)."""
    judge: Bus = await connected(secure.settings("judge"), "judge")
    try:
        raws = read_raw(judge.js, judge.stream.name, subject=judge.subjects.events)
        return [(r.subject, parse_event(r.data, subject=r.subject)) async for r in raws]
    finally:
        await judge.stop()


async def test_a_judge_replaying_the_log_links_no_run_to_a_control(
    secure: SecureNats, admin_bus: Bus, tmp_path: Path
) -> None:
    tasks, campaign, declared = await _submitted(secure, tmp_path)
    controls = await _requested(secure, tasks, campaign, declared)
    seen = await _judges_view(secure)
    sealed = [e for _, e in seen if isinstance(e, ControlDeclared)]
    assert len(controls) == len(declared) == len(sealed) >= 2 * 5, "the judge reads them all"
    assert {e.task_id for e in sealed} == set(TASKS)  # what a key-less reader may know
    assert not linked_by_declarations(seen) & controls
    assert not secure.violations()


async def test_a_judge_reading_the_roster_links_no_run_to_a_control(
    secure: SecureNats, admin_bus: Bus, tmp_path: Path
) -> None:
    """Each control agent is in the published roster like an agent (on main's code, and
    before it was listed, every control run was linked by its agent's absence)."""
    tasks, campaign, declared = await _submitted(secure, tmp_path)
    controls = await _requested(secure, tasks, campaign, declared)
    seen = await _judges_view(secure)
    assert not linked_by_roster(seen) & controls
    (started,) = [e for _, e in seen if isinstance(e, CampaignStarted)]
    listed = {a.agent_id for a in started.campaign.agents}
    users = load_campaign(ROOT / "examples" / "campaign.yaml").agents
    assert {d.agent_id for d in declared} <= listed
    assert started.campaign.agents[0] == users[0], "the roster starts as the campaign file's"
    assert started.campaign.controls is not None
    assert started.campaign.controls.agents == len(listed) - len(users)
    # Every run of a control agent is one of its declared runs: none as an agent's.
    requested = {e.run_id for _, e in seen if isinstance(e, RunRequested)}
    assert requested == controls | {
        r.run_id
        for t in tasks
        for r in plan_runs(
            load_campaign(ROOT / "examples" / "campaign.yaml"), t, producer=P, cause="c"
        )
    }
