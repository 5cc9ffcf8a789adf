"""The runner service: wiring of handlers to the bus."""

from __future__ import annotations

from assay.bus import Bus
from assay.config import Settings
from assay.providers import provider_for
from assay.store import BlobStore, open_store
from assay_schemas import CampaignStarted, SandboxReady, TaskSubmitted

from .handlers import ProviderFactory, RunnerService

__all__ = ["SERVICE", "build"]

SERVICE = "runner"


def build(
    settings: Settings,
    *,
    store: BlobStore | None = None,
    providers: ProviderFactory = provider_for,
    concurrency: int | None = None,
) -> RunnerService:
    """A runner with its consumers registered (not started). Instances share the durables."""
    bus = Bus(settings, service=SERVICE)
    service = RunnerService(
        bus=bus,
        store=store or open_store(settings),
        providers=providers,
        gateway_root=settings.state_dir / "gateways",
    )
    bus.consume_event(
        CampaignStarted,
        service.on_campaign_started,
        durable="runner-campaigns",
    )
    bus.consume_event(
        TaskSubmitted,
        service.on_task_submitted,
        durable="runner-tasks",
        on_refused=service.on_task_refused,
    )
    bus.consume_event(
        SandboxReady,
        service.on_sandbox_ready,
        durable="runner-runs",
        max_workers=concurrency or settings.runner_concurrency,
    )
    return service
