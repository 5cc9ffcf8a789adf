"""The sandbox-manager's contract: what it consumes, publishes and serves (see `assay.contract`)."""

from __future__ import annotations

from assay.contract import Consumer, ServiceContract
from assay_schemas import AgentFinished, ArtifactsSealed, RunFailed, RunRequested, SandboxReady

__all__ = ["ALIVE", "CONTRACT", "FAILED", "FINISHED", "RUNS"]

RUNS = Consumer("sandbox-manager-runs", RunRequested)
"""Shared by the instances: any one of them opens a run's sandbox."""
FINISHED = Consumer("sandbox-manager-{instance}-finished", AgentFinished)
FAILED = Consumer("sandbox-manager-{instance}-failed", RunFailed)
"""Each instance sees every end of run and seals only its own sandboxes."""
ALIVE = "sandbox-alive.{instance}"
"""An instance answers here while connected: the others ask before declaring its seals lost
(see failover). Its own subject, so that asking grants no right to command a sandbox."""

CONTRACT = ServiceContract(
    service="sandbox-manager",
    role="sandbox-manager",
    consumes=(RUNS, FINISHED, FAILED),
    publishes=(SandboxReady, ArtifactsSealed, RunFailed),
    serves=("sandbox.{instance}", ALIVE),
    calls=(ALIVE.replace("{instance}", "*"),),  # the others' liveness (see failover)
)
