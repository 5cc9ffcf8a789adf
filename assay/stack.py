"""Every service in one process: the embedded default (`assay up --all`, `assay run`).

Deployed, each service runs as its own process (`assay serve NAME`); here they share an
event loop but still talk only through NATS and the blob store, exactly as when apart.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from assay.bus import Bus, Delivery
from assay.config import Settings
from assay.schemas import CampaignStarted, JudgeSpec, safe_token
from assay.store import BlobStore, open_store

__all__ = ["JurySupervisor", "Stack"]

log = logging.getLogger("assay.stack")


@dataclass(kw_only=True)
class JurySupervisor:
    """Starts a judge service for every judge a campaign names (one-machine mode only)."""

    settings: Settings
    store: BlobStore
    bus: Bus
    judges: dict[str, Any] = field(default_factory=dict)

    async def on_campaign(self, event: CampaignStarted, delivery: Delivery) -> None:
        """Start the judges of a new campaign that are not running yet."""
        for spec in event.campaign.judges:
            await self.ensure(spec)

    async def ensure(self, spec: JudgeSpec) -> None:
        """Run `spec`'s judge here unless a judge with its id already runs."""
        from assay.judge.app import build, start

        if spec.judge_id in self.judges:
            return
        service = build(self.settings, spec, store=self.store)
        await start(service)
        self.judges[spec.judge_id] = service
        log.info("judge %s started", spec.judge_id)

    async def stop(self) -> None:
        """Stop every judge it started."""
        from assay.judge.app import stop

        for service in self.judges.values():
            await stop(service)
        self.judges.clear()


@dataclass(kw_only=True)
class Stack:
    """The services of one machine, started and stopped together."""

    settings: Settings
    store: BlobStore
    started: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def for_settings(cls, settings: Settings) -> Stack:
        """A stack on the configured store."""
        return cls(settings=settings, store=open_store(settings))

    async def start(self, *, aggregator: bool = True) -> None:
        """Start sandbox-manager, runner, rule judge, jury supervisor and aggregator."""
        from assay.aggregator.app import build as build_aggregator
        from assay.judge.app import build_rules
        from assay.judge.app import start as start_judge
        from assay.runner.app import build as build_runner
        from assay.sandbox_manager.app import build as build_sandbox
        from assay.sandbox_manager.app import start as start_sandbox

        sandbox = build_sandbox(self.settings, store=self.store)
        await start_sandbox(sandbox)
        self.started["sandbox-manager"] = sandbox
        runner = build_runner(self.settings, store=self.store)
        await runner.bus.start()
        self.started["runner"] = runner
        rules = build_rules(self.settings, store=self.store)
        await start_judge(rules)
        self.started["rules"] = rules
        bus = Bus(self.settings, service="jury")
        jury = JurySupervisor(settings=self.settings, store=self.store, bus=bus)
        bus.consume(
            bus.subjects.event("CampaignStarted"),
            jury.on_campaign,
            durable=f"jury-{safe_token(self.settings.instance)}",
            event_type=CampaignStarted,
        )
        await bus.start()
        self.started["jury"] = jury
        if aggregator:
            agg = build_aggregator(self.settings)
            await agg.start()
            self.started["aggregator"] = agg

    async def stop(self) -> None:
        """Stop everything in reverse order."""
        from assay.judge.app import stop as stop_judge

        for name in reversed(list(self.started)):
            service = self.started.pop(name)
            try:
                if name == "jury":
                    await service.stop()
                    await service.bus.stop()
                elif name == "rules":
                    await stop_judge(service)
                elif name == "aggregator":
                    await service.stop()
                else:
                    await service.bus.stop()
                    if name == "runner":
                        await service.aclose()
            except Exception:  # keep stopping the rest
                log.exception("stopping %s failed", name)
