"""The judge service's own settings (``ASSAY_*``, beside the core's)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from assay.config import Settings

__all__ = ["JudgeSettings"]


class JudgeSettings(Settings):
    """Which judge a judge service runs, for which campaigns; how long a rule check may run."""

    judge_spec: Path | None = None
    """The judge spec file `assay serve judge` (and the `assay-judge` entry point) runs."""
    judge_campaigns: list[str] = Field(default_factory=list)
    """Campaigns that judge is enabled for besides those that name it (``--campaign``);
    empty: every campaign, present and future."""
    judge_check_budget_s: float = Field(default=5.0, gt=0)
    """Seconds one rule check may run on a sealed run before it fails, naming the check."""
    model_cache_dir: Path | None = None
    """The development cache's answers, for campaigns that say ``cache:`` (default
    ``<home>/cache/models``, the runners' own; `assay run` keeps it under the home)."""

    @property
    def model_cache(self) -> Path:
        """Where the development cache keeps answers."""
        return self.model_cache_dir or self.home / "cache" / "models"
