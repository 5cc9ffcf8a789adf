"""The sandbox-manager service: built from its contract and settings, its handlers wired to
the bus."""

from __future__ import annotations

import logging

from assay.bus import Bus, RequestServer, subscribe
from assay.config import Settings
from assay.contract import rpc_subject
from assay.store import BlobStore, open_store
from assay_schemas import safe_token

from .backends import BubblewrapBackend, DockerBackend, SandboxBackend, SandboxBackendUnavailable
from .contract import CONTRACT, FAILED, FINISHED, RUNS
from .failover import SealWatch
from .handlers import SandboxService
from .handlers.exec_server import is_claim
from .settings import SandboxManagerSettings

__all__ = ["SERVICE", "build", "make_backends"]

SERVICE = CONTRACT.service
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


async def _alive(_: bytes) -> bytes:
    return b"alive"


def build(
    settings: Settings,
    *,
    store: BlobStore | None = None,
    backends: dict[str, SandboxBackend] | None = None,
) -> SandboxService:
    """A sandbox service with its consumers and command subscriber registered (not started)."""
    own = SandboxManagerSettings.of(settings)
    bus = Bus(settings, service=SERVICE)
    instance = safe_token(settings.instance)
    service = SandboxService(
        bus=bus,
        store=store or open_store(settings),
        backends=backends if backends is not None else make_backends(settings),
        instance=instance,
        max_live=own.sandbox_max_live,
        max_warm=own.sandbox_warm,
        drive_lease_s=own.sandbox_drive_lease_s,
        seal_watch=SealWatch(bus, instance, path=settings.instance_state / "seal-watch.json"),
    )
    mine = {"instance": instance}
    workers = own.sandbox_concurrency
    # Every one gives a run up with a RunFailed and its sandbox destroyed (on_given_up).
    ends = {"max_workers": workers, "on_give_up": service.on_given_up}
    subscribe(bus, RUNS, service.on_run_requested, mine, **ends)
    # Each instance sees every end of run and seals only its own sandboxes.
    subscribe(bus, FINISHED, service.on_run_ended, mine, **ends)
    subscribe(bus, FAILED, service.on_run_ended, mine, **ends)
    command, alive = CONTRACT.serves
    subject = rpc_subject(bus.subjects.prefix, command, mine)
    bus.serve_requests(
        RequestServer(subject, service.handle_command, max_workers=16, unmetered=is_claim)
    )
    subject = rpc_subject(bus.subjects.prefix, alive, mine)
    bus.serve_requests(RequestServer(subject, _alive, max_workers=1))
    return service
