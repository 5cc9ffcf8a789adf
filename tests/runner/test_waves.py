"""The waves' plan (#51): which tasks of a stopping campaign are requested, and when."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from assay_runner.handlers.waves import Waves
from assay_runner.waves import task_order, tasks_due, to_cancel
from assay_schemas import (
    RULES_JUDGE_ID,
    AgentSpec,
    ArtifactsSealed,
    CampaignHistory,
    CampaignSpec,
    CampaignStarted,
    CampaignStopped,
    Event,
    JudgmentRecorded,
    Producer,
    RunRequested,
    StoppingSpec,
    Task,
    TaskSubmitted,
    run_id_for,
)

P = Producer(service="test", version="0")
TASKS = [f"t{i:02d}" for i in range(10)]
SPEC = CampaignSpec(
    campaign_id="c",
    agents=[AgentSpec(agent_id="a", model="m"), AgentSpec(agent_id="b", model="m")],
    stopping=StoppingSpec(when="ranking_settled", check_every=2),
)


def _history(*events: Event) -> CampaignHistory:
    history = CampaignHistory(campaign_id="c")
    history.apply(CampaignStarted(event_id="cs", campaign_id="c", campaign=SPEC, producer=P))
    for t in TASKS:
        task = Task(task_id=t, prompt="p")
        history.apply(
            TaskSubmitted(event_id=f"ts-{t}", campaign_id="c", task_id=t, task=task, producer=P)
        )
    for e in events:
        history.apply(e)
    return history


def _requested(t: str) -> list[RunRequested]:
    out: list[RunRequested] = []
    for agent in SPEC.agents:
        rid = run_id_for("c", t, agent.agent_id, 0)
        out.append(
            RunRequested(
                event_id=f"rr-{rid}",
                campaign_id="c",
                run_id=rid,
                task_id=t,
                task=Task(task_id=t, prompt="p"),
                agent=agent,
                epoch=0,
                limits=SPEC.limits,
                sandbox=SPEC.sandbox,
                producer=P,
            )
        )
    return out


def _done(t: str) -> list[Event]:
    out: list[Event] = []
    for r in _requested(t):
        rid = r.run_id or ""
        env = {"campaign_id": "c", "run_id": rid, "task_id": t, "producer": P}
        out.append(
            ArtifactsSealed(
                event_id=f"as-{rid}",
                files=[],
                agent_id=r.agent.agent_id,
                epoch=0,
                sandbox_id="s",
                **env,
            )
        )
        out.append(
            JudgmentRecorded(
                event_id=f"jr-{rid}",
                judge_id=RULES_JUDGE_ID,
                sample=0,
                rubric_id="r",
                rubric_version=1,
                **env,
            )
        )
    return out


def test_the_order_is_seeded_by_campaign_not_by_submission() -> None:
    assert task_order("c", TASKS) == task_order("c", list(reversed(TASKS)))
    assert task_order("c", TASKS) != task_order("d", TASKS)


def test_two_waves_first_then_one_more_per_complete_wave() -> None:
    order = task_order("c", TASKS)
    assert tasks_due(SPEC, _history(), TASKS) == order[:4]
    two = [e for t in order[:4] for e in _requested(t)]
    assert tasks_due(SPEC, _history(*two), TASKS) == []
    # The first wave complete: one more wave may start; a half-done wave opens nothing.
    first = [e for t in order[:2] for e in _done(t)]
    assert tasks_due(SPEC, _history(*two, *first), TASKS) == order[4:6]
    half = [e for e in _done(order[0])]
    assert tasks_due(SPEC, _history(*two, *half), TASKS) == []


def test_waves_complete_in_the_order_their_tasks_were_requested() -> None:
    """Tasks accepted while others were already requested take their place after them.
    Counted in the seeded order, a later one sorting first held every wave behind it open:
    a campaign whose first tasks were requested as their submissions were accepted (the
    e2e crash test, admissions 64 at a time) stalled one wave short."""
    order = task_order("c", TASKS)
    # The first four requested are the last four of the seeded order (accepted first).
    first, later = order[-4:], order[:2]
    requested_order = [*first, *later]
    events = [e for t in requested_order for e in _requested(t)]
    done = [e for t in first for e in _done(t)]  # the first two waves complete; `later` runs
    history = _history(*events, *done)
    # Two complete waves in request order: two waves may be in flight beyond them (the
    # third is `later`), so two more tasks are due; counted in the seeded order, `later`
    # (not complete) came first and nothing was.
    assert tasks_due(SPEC, history, TASKS, requested_order) == order[2:4]
    assert tasks_due(SPEC, history, TASKS) == []


def test_a_stop_requests_nothing_and_cancels_every_planned_run_never_requested() -> None:
    order = task_order("c", TASKS)
    two = [e for t in order[:4] for e in _requested(t)]
    stop = CampaignStopped(
        event_id="stop",
        campaign_id="c",
        reason="ranking_settled",
        settled=True,
        decided_at_sequence=9,
        producer=P,
    )
    history = _history(*two, stop)
    assert tasks_due(SPEC, history, TASKS) == []
    left = to_cancel(SPEC, history, TASKS)
    assert sorted(left) == sorted(order[4:])
    assert all(len(runs) == 2 for runs in left.values())


class _Looks(Waves):
    """A pacer whose looks are counted; its first look sees a task accepted meanwhile (the
    door calls `pace` while the look is reading the log), and every look finds nothing
    left to request in what it read."""

    def __init__(self) -> None:  # no bus: only the pacer's loop is under test
        self._pacers = {}
        self._poked = set()
        self.pace_interval_s = 0.0
        self.looks = 0

    async def pace_once(self, campaign: CampaignSpec) -> bool:
        self.looks += 1
        if self.looks == 1:
            await asyncio.sleep(0)
            self.pace(campaign)  # accepted after this look read the log: not in its read
        return True


async def test_a_task_accepted_while_the_pacer_looks_gets_another_look() -> None:
    """The pacer ended on a look that missed a task accepted during it, and nobody paced
    that task (the stopping demo hung after its first waves in a loaded full run)."""
    waves = _Looks()
    campaign = SimpleNamespace(campaign_id="c")
    waves.pace(campaign)  # type: ignore[arg-type]
    await asyncio.wait_for(waves._pacers["c"], 5)
    assert waves.looks == 2
