"""The runner's contract: what it consumes, publishes and calls on the bus (see `assay.contract`)."""

from __future__ import annotations

from assay.contract import Consumer, ServiceContract
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    CampaignStarted,
    RunFailed,
    RunRequested,
    SandboxReady,
    TaskAccepted,
    TaskRejected,
    TaskSubmitted,
)

__all__ = ["CAMPAIGNS", "CONTRACT", "RUNS", "TASKS"]

CAMPAIGNS = Consumer("runner-campaigns", CampaignStarted)
TASKS = Consumer("runner-tasks", TaskSubmitted)
RUNS = Consumer("runner-runs", SandboxReady)
"""Instances share every durable: each message is handled by one runner."""

CONTRACT = ServiceContract(
    service="runner",
    role="runner",
    consumes=(CAMPAIGNS, TASKS, RUNS),
    publishes=(
        TaskAccepted,
        TaskRejected,
        RunRequested,
        AgentStepLogged,
        AgentFinished,
        RunFailed,
    ),
    calls=("sandbox.*",),
    reads_uploads=True,
)
