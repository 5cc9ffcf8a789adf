"""The rules of the log every reader and writer shares: where an event is stored, which
runs a task asks for, how many samples a judge owes a run.

Each is written once, here: the runner schedules what `CampaignHistory` expects, the judge
takes the samples the counting rule counts, and the bus, the permissions and the decoder name the
same subjects (issue #49: the copies had begun to disagree).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

from ._domain import AgentSpec, CampaignSpec
from ._envelope import run_id_for

__all__ = [
    "EVENT_TOKEN",
    "EventSubject",
    "ExpectedRun",
    "event_subject",
    "events_subject",
    "expected_runs",
    "parse_event_subject",
    "samples_owed",
]

EVENT_TOKEN = "ev"
"""The second token of every event subject: `<prefix>.ev.<type>.<campaign>.<run or ->`."""


def event_subject(
    prefix: str, event_type: str = "*", campaign_id: str = "*", run_id: str = "*"
) -> str:
    """The subject of an event (or, with `*` for a token, a filter over events). An event
    of no run is stored under `NO_RUN`."""
    return f"{prefix}.{EVENT_TOKEN}.{event_type}.{campaign_id}.{run_id}"


def events_subject(prefix: str) -> str:
    """Every event subject under `prefix` (the event stream's filter)."""
    return f"{prefix}.{EVENT_TOKEN}.>"


class EventSubject(NamedTuple):
    """The tokens of an event subject (`run_id` is `NO_RUN` for an event of no run)."""

    prefix: str
    event_type: str
    campaign_id: str
    run_id: str


def parse_event_subject(subject: str) -> EventSubject | None:
    """The tokens of an event subject; None when `subject` is none (a single-token prefix,
    as every deployment and test uses)."""
    tokens = subject.split(".")
    if len(tokens) != 5 or tokens[1] != EVENT_TOKEN:
        return None
    prefix, _, event_type, campaign_id, run_id = tokens
    return EventSubject(prefix, event_type, campaign_id, run_id)


class ExpectedRun(NamedTuple):
    """One run a submitted task asks for."""

    agent: AgentSpec
    epoch: int
    run_id: str


def expected_runs(
    campaign: CampaignSpec, task_id: str, *, skip: Collection[str] = ()
) -> list[ExpectedRun]:
    """The runs a task asks for in a campaign: each agent × each epoch, first attempts
    (retries and controls are requested on their own). `skip`: agent ids of the roster
    that are control agents (their runs are their declarations', not the roster's)."""
    return [
        ExpectedRun(agent, epoch, run_id_for(campaign.campaign_id, task_id, agent.agent_id, epoch))
        for agent in campaign.agents
        if agent.agent_id not in skip
        for epoch in range(campaign.epochs)
    ]


def samples_owed(judge_sampling: int, task_sampling: int = 1) -> int:
    """Samples a judge owes each run: the larger of its spec's and the task's
    `sampling_times`. A task may ask for more (a noisy, hard-to-grade task) but never
    fewer, so one task cannot silently thin out a judge's evidence."""
    return max(judge_sampling, task_sampling)
