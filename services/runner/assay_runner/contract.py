"""The runner's contract: what it consumes, publishes and calls on the bus (see `assay.contract`)."""

from __future__ import annotations

from assay.contract import Consumer, ServiceContract
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    CampaignStarted,
    CampaignStopped,
    RunCancelled,
    RunFailed,
    RunRequested,
    SandboxReady,
    TaskAccepted,
    TaskRejected,
    TaskSubmitted,
)

__all__ = ["ANSWERS", "CAMPAIGNS", "CONTRACT", "RUNS", "RUN_EVENTS", "STOPS", "TASKS"]

CAMPAIGNS = Consumer("runner-campaigns", CampaignStarted)
TASKS = Consumer("runner-tasks", TaskSubmitted)
RUNS = Consumer("runner-runs", SandboxReady)
STOPS = Consumer("runner-stops", CampaignStopped)
"""A campaign stopped early: its runs not yet requested are cancelled."""
"""Instances share every durable: each message is handled by one runner."""

ANSWERS = (TaskAccepted, TaskRejected)
"""A submission's answer, published on the submitter's campaign."""
RUN_EVENTS = (RunRequested, AgentStepLogged, AgentFinished, RunFailed, RunCancelled)

CONTRACT = ServiceContract(
    service="runner",
    role="runner",
    consumes=(CAMPAIGNS, TASKS, RUNS, STOPS),
    publishes=(*ANSWERS, *RUN_EVENTS),
    calls=("sandbox.*",),  # any instance: a run's sandbox lives where it was opened
    reads_uploads=True,  # a publisher's attachments, imported into the blob store
)
