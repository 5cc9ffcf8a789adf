"""The runner service: built from its contract and settings, its handlers wired to the bus."""

from __future__ import annotations

from assay.bus import Bus, subscribe
from assay.config import Settings
from assay.providers import provider_for
from assay.security.controls import controls_key
from assay.store import BlobStore, open_store

from .contract import CAMPAIGNS, CONTRACT, RUNS, STOPS, TASKS
from .handlers import ProviderFactory, RunnerService, admissions_in_flight
from .settings import RunnerSettings
from .web import NetPolicy

__all__ = ["SERVICE", "build"]

SERVICE = CONTRACT.service


def build(
    settings: Settings,
    *,
    store: BlobStore | None = None,
    providers: ProviderFactory = provider_for,
    concurrency: int | None = None,
    web_net: NetPolicy | None = None,
) -> RunnerService:
    """A runner with its consumers registered (not started). Instances share the durables.

    `web_net`: how web tools reach the network; tests pass one that reaches loopback."""
    own = RunnerSettings.of(settings)
    drives = concurrency or own.runner_concurrency
    bus = Bus(settings, service=SERVICE)
    service = RunnerService(
        bus=bus,
        store=store or open_store(settings),
        providers=providers,
        gateway_root=settings.state_dir / "gateways",
        web_net=web_net or NetPolicy(trusted_hosts=frozenset(own.web_trusted_hosts)),
        controls=controls_key(settings),
        model_cache_dir=own.model_cache,
        admissions=admissions_in_flight(drives),
    )
    subscribe(bus, CAMPAIGNS, service.on_campaign_started)
    subscribe(
        bus,
        TASKS,
        service.on_task_submitted,
        on_refused=service.on_task_refused,
        max_workers=service.admissions,
    )
    subscribe(
        bus,
        RUNS,
        service.on_sandbox_ready,
        max_workers=drives,
        on_give_up=service.on_run_given_up,
    )
    subscribe(bus, STOPS, service.on_campaign_stopped)
    return service
