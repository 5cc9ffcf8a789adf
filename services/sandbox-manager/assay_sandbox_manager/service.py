"""The sandbox-manager service: wiring of handlers to the bus."""

from __future__ import annotations

import logging

from assay.bus import Bus, RequestServer
from assay.config import Settings
from assay.store import BlobStore, open_store
from assay_schemas import AgentFinished, RunFailed, RunRequested, safe_token

from .backends import BubblewrapBackend, DockerBackend, SandboxBackend, SandboxBackendUnavailable
from .handlers import SandboxService

__all__ = ["SERVICE", "build", "make_backends"]

SERVICE = "sandbox-manager"
log = logging.getLogger("assay.sandbox_manager")


def make_backends(settings: Settings, *, docker: bool = True) -> dict[str, SandboxBackend]:
    """Bubblewrap always; Docker when an engine is reachable."""
    state = settings.instance_state
    backends: dict[str, SandboxBackend] = {
        "bubblewrap": BubblewrapBackend(state / "bwrap", state / "seals"),
    }
    if docker:
        try:
            backends["docker"] = DockerBackend(state / "docker", state / "seals")
        except SandboxBackendUnavailable as e:
            log.info("docker backend disabled: %s", e)
    return backends


def build(
    settings: Settings,
    *,
    store: BlobStore | None = None,
    backends: dict[str, SandboxBackend] | None = None,
) -> SandboxService:
    """A sandbox service with its consumers and command subscriber registered (not started)."""
    bus = Bus(settings, service=SERVICE)
    instance = safe_token(settings.instance)
    service = SandboxService(
        bus=bus,
        store=store or open_store(settings),
        backends=backends if backends is not None else make_backends(settings),
        instance=instance,
    )
    subjects = bus.subjects
    bus.consume_event(
        RunRequested,
        service.on_run_requested,
        durable="sandbox-manager-runs",
        max_workers=settings.sandbox_concurrency,
    )
    # Each instance sees every end of run and seals only its own sandboxes.
    for ended, suffix in ((AgentFinished, "finished"), (RunFailed, "failed")):
        bus.consume_event(
            ended,
            service.on_run_ended,
            durable=f"sandbox-manager-{instance}-{suffix}",
            max_workers=settings.sandbox_concurrency,
        )
    bus.serve_requests(
        RequestServer(subjects.rpc("sandbox", instance), service.handle_command, max_workers=16)
    )
    return service
