"""The runner's own settings (``ASSAY_*``, beside the core's)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from assay.config import Settings

__all__ = ["RunnerSettings"]


class RunnerSettings(Settings):
    """How many runs one runner drives, and which private hosts its web tools may reach."""

    runner_concurrency: int = Field(default=8, ge=1)
    """Agent runs one runner instance drives at once."""
    web_trusted_hosts: list[str] = Field(default_factory=list)
    """Search engine hosts this deployment runs on a private network (a self-hosted
    SearXNG): web_search may reach their private addresses; web_fetch never may."""
    model_cache_dir: Path | None = None
    """The development cache's answers, for campaigns that say ``cache:`` (default
    ``<home>/cache/models``; `assay run` keeps it under the home, not the run's folder)."""

    @property
    def model_cache(self) -> Path:
        """Where the development cache keeps answers."""
        return self.model_cache_dir or self.home / "cache" / "models"
