"""The jury: starts a judge service for every judge a campaign names (one-machine mode).

Deployed, each judge runs as its own service (`assay serve judge --judge SPEC`); on one
machine the jury watches `CampaignStarted` and starts the judges each campaign names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from assay.bus import Bus, Delivery
from assay.config import Settings
from assay.store import BlobStore
from assay_schemas import CampaignStarted, JudgeSpec

from .llm import JudgeService

__all__ = ["JudgeFactory", "JurySupervisor"]

JudgeFactory = Callable[[Settings, JudgeSpec, BlobStore], JudgeService]
"""Builds a judge service (wired, not started) for one spec: `assay_judge.service.build`."""

log = logging.getLogger("assay.judge.jury")


@dataclass(kw_only=True)
class JurySupervisor:
    """Starts a judge service for every judge a campaign names, once per judge id."""

    settings: Settings
    store: BlobStore
    bus: Bus
    build_judge: JudgeFactory
    judges: dict[str, JudgeService] = field(default_factory=dict)

    async def on_campaign(self, event: CampaignStarted, delivery: Delivery) -> None:
        """Start the judges of a new campaign that are not running yet."""
        for spec in event.campaign.judges:
            await self.ensure(spec)

    async def ensure(self, spec: JudgeSpec) -> None:
        """Run `spec`'s judge here unless a judge with its id already runs."""
        if spec.judge_id in self.judges:
            return
        service = self.build_judge(self.settings, spec, self.store)
        await service.start()
        self.judges[spec.judge_id] = service
        log.info("judge %s started", spec.judge_id)

    async def start(self) -> None:
        """Start watching for campaigns."""
        await self.bus.start()

    async def stop(self) -> None:
        """Stop watching, then stop every judge it started."""
        await self.bus.stop()
        for service in self.judges.values():
            await service.stop()
        self.judges.clear()
