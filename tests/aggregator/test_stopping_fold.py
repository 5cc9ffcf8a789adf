"""Cancellations and stops in the one lifecycle and the fold (#51): a cancelled run ends
once, never as a failure; a cancellation of a requested run, or a request of a cancelled
one, is a second end; a logged stop that is not the log's own decision is named."""

from __future__ import annotations

from assay_aggregator.invariants import check_log
from assay_schemas import (
    AgentSpec,
    CampaignSpec,
    CampaignStarted,
    CampaignStopped,
    Event,
    Producer,
    RunCancelled,
    RunHistory,
    RunRequested,
    StoppingSpec,
    Task,
    TaskSubmitted,
    problems_of,
    run_id_for,
)

P = Producer(service="test", version="0")
SPEC = CampaignSpec(
    campaign_id="c",
    agents=[AgentSpec(agent_id="a", model="m"), AgentSpec(agent_id="b", model="m")],
    stopping=StoppingSpec(when="ranking_settled", check_every=2),
)
TASK = Task(task_id="t", prompt="p")
RUN = run_id_for("c", "t", "a", 0)
OTHER = run_id_for("c", "t", "b", 0)


def _start() -> list[Event]:
    return [
        CampaignStarted(event_id="cs", campaign_id="c", campaign=SPEC, producer=P),
        TaskSubmitted(event_id="ts", campaign_id="c", task_id="t", task=TASK, producer=P),
    ]


def _of(run: str, prefix: str) -> dict[str, object]:
    """What every event of run `run` in task t of campaign c carries."""
    return {"event_id": f"{prefix}-{run}", "campaign_id": "c", "run_id": run, "task_id": "t"}


def _request(run: str, agent: str) -> RunRequested:
    return RunRequested.model_validate(
        {
            **_of(run, "rr"),
            "task": TASK,
            "agent": SPEC.agent(agent),
            "epoch": 0,
            "limits": SPEC.limits,
            "sandbox": SPEC.sandbox,
            "producer": P,
        }
    )


def _cancel(run: str, agent: str) -> RunCancelled:
    return RunCancelled.model_validate(
        {**_of(run, "rc"), "agent_id": agent, "epoch": 0, "producer": P}
    )


def test_a_cancelled_run_ends_once_and_is_neither_failed_nor_missing() -> None:
    events = [*_start(), _cancel(RUN, "a"), _cancel(OTHER, "b")]
    state, breaches = check_log(enumerate(events, 1))
    assert breaches == []
    assert state.runs[RUN].phase == "cancelled" and not state.runs[RUN].failed
    history = RunHistory.fold(e for e in events if e.run_id == RUN)
    assert history.outcome is not None and history.outcome.state == "cancelled"
    assert problems_of(state.histories["c"]).ok
    assert state.histories["c"].complete


def test_cancelling_a_requested_run_is_a_second_end_and_refused() -> None:
    events = [*_start(), _request(RUN, "a"), _cancel(RUN, "a")]
    state, breaches = check_log(enumerate(events, 1))
    assert [(b.kind, b.run_id) for b in breaches] == [("second_end", RUN)]
    assert state.runs[RUN].phase == "requested"


def test_requesting_a_cancelled_run_is_refused() -> None:
    events = [*_start(), _cancel(RUN, "a"), _request(RUN, "a")]
    state, breaches = check_log(enumerate(events, 1))
    assert [(b.kind, b.run_id) for b in breaches] == [("second_end", RUN)]
    assert state.runs[RUN].phase == "cancelled"


def test_a_logged_stop_the_log_did_not_decide_is_named() -> None:
    forged = CampaignStopped(
        event_id="stop",
        campaign_id="c",
        reason="ranking_settled",
        settled=True,
        leader="a",
        decided_at_sequence=2,
        producer=P,
    )
    _, breaches = check_log(enumerate([*_start(), forged], 1))
    assert [b.kind for b in breaches] == ["stop_differs"]
