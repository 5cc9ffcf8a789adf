"""The jury: starts a judge service for every judge a campaign names (one-machine mode).

Deployed, each judge runs as its own service (`assay serve judge --judge SPEC`); on one
machine the jury watches `CampaignStarted` and starts the judges each campaign names.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from assay.bus import Bus, Delivery
from assay.config import Settings
from assay.store import BlobStore, open_store
from assay_schemas import CampaignStarted, JudgeSpec, safe_token

from .llm.handlers import JudgeService
from .service import build as build_judge

__all__ = ["JurySupervisor", "build"]

log = logging.getLogger("assay.judge.jury")


@dataclass(kw_only=True)
class JurySupervisor:
    """Starts a judge service for every judge a campaign names, once per judge id."""

    settings: Settings
    store: BlobStore
    bus: Bus
    judges: dict[str, JudgeService] = field(default_factory=dict)

    async def on_campaign(self, event: CampaignStarted, delivery: Delivery) -> None:
        """Start the judges of a new campaign that are not running yet."""
        for spec in event.campaign.judges:
            await self.ensure(spec)

    async def ensure(self, spec: JudgeSpec) -> None:
        """Run `spec`'s judge here unless a judge with its id already runs."""
        if spec.judge_id in self.judges:
            return
        service = build_judge(self.settings, spec, store=self.store)
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


def build(settings: Settings, *, store: BlobStore | None = None) -> JurySupervisor:
    """The jury with its `CampaignStarted` consumer registered (not started)."""
    bus = Bus(settings, service="jury")
    jury = JurySupervisor(settings=settings, store=store or open_store(settings), bus=bus)
    bus.consume_event(
        CampaignStarted,
        jury.on_campaign,
        durable=f"jury-{safe_token(settings.instance)}",
    )
    return jury
