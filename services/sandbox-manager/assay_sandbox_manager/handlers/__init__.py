"""Sandbox manager: RunRequested → sandbox; commands over NATS; run ended → seal, destroy."""

from __future__ import annotations

from dataclasses import dataclass

from .exec_server import ExecServer
from .lifecycle import Lifecycle, SandboxGivenUp
from .reaper import Reaper, RunOverdue

__all__ = ["RunOverdue", "SandboxGivenUp", "SandboxService"]


@dataclass(kw_only=True)
class SandboxService(Lifecycle, Reaper, ExecServer):
    """Owns the sandboxes of one instance; every effect is idempotent under redelivery."""
