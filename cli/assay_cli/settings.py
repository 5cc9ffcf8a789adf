"""The CLI's own settings (``ASSAY_*``, beside the core's)."""

from __future__ import annotations

from pydantic import Field

from assay.config import Settings

__all__ = ["CliSettings"]


class CliSettings(Settings):
    """What the commands that load tasks allow."""

    max_tasks_per_submission: int = Field(default=10_000, ge=1)
    """Most tasks one `assay submit` / `assay run` may load."""
