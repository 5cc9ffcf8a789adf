"""The sandbox-manager's own settings (``ASSAY_*``, beside the core's)."""

from __future__ import annotations

from pydantic import Field

from assay.config import Settings

__all__ = ["SandboxManagerSettings"]


class SandboxManagerSettings(Settings):
    """How much one sandbox-manager instance works on and holds at once."""

    sandbox_concurrency: int = Field(default=8, ge=1)
    """Sandbox creations and seals one sandbox-manager instance works on at once."""
    sandbox_max_live: int = Field(default=4096, ge=1)
    """Most sandboxes one sandbox-manager instance holds at once. A campaign's runs are
    all requested when its tasks are admitted, whatever the runners' concurrency; past this
    many, a request waits for a sandbox to be destroyed, so that a publisher's thousands of
    tasks do not fill the node with idle sandboxes."""
    sandbox_warm: int = Field(default=64, ge=1)
    """Most sandboxes one instance holds made ahead of their run's drive (the warm pool):
    each requested run's own sandbox, fresh and never reused, opened before a runner takes
    the run so that making it is off the run's critical path. Past this many waiting, a
    request waits in the bus until a runner takes one (its drive claims the sandbox), so a
    queue of thousands of runs waits as messages, not as idle sandboxes."""
    sandbox_drive_lease_s: float = Field(default=15.0, gt=0)
    """How long the drive holding a sandbox (a runner's handling of its run's SandboxReady)
    may be idle, no command running, before another drive of the run takes the sandbox
    over: a second delivery of a run waits this long for a dead runner's drive."""
