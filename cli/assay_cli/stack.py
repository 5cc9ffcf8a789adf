"""Every service in one process: the embedded default (`assay up --all`, `assay run`).

Deployed, each service runs as its own process (`assay serve NAME`); here they share an
event loop but still talk only through NATS and the blob store, exactly as when apart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from assay.bus import Bus
from assay.config import Settings
from assay.service import Service, build_service
from assay.store import BlobStore, ensure_upload_bucket, open_store, upload_bucket
from assay_schemas import BusError

if TYPE_CHECKING:
    from assay.security import EmbeddedAuth

__all__ = ["EMBEDDED_SERVICES", "Stack", "create_streams"]

log = logging.getLogger("assay.stack")

EMBEDDED_SERVICES: tuple[str, ...] = ("sandbox-manager", "runner", "rules", "jury", "aggregator")
"""What one machine runs (`assay up --all`, `assay run`), in start order; stopped in
reverse. Named judges are started by the jury as campaigns name them."""


@dataclass(kw_only=True)
class Stack:
    """The services of one machine, sharing one blob store, started and stopped together."""

    settings: Settings
    store: BlobStore
    auth: EmbeddedAuth | None = None
    """The embedded server's users (`assay up --all --auth`): each service then connects
    as its own least-privilege user, as it would in the split stack."""
    started: dict[str, Service] = field(default_factory=dict)

    @classmethod
    def for_settings(cls, settings: Settings) -> Stack:
        """A stack on the configured store."""
        return cls(settings=settings, store=open_store(settings))

    def settings_of(self, name: str) -> Settings:
        """The settings the service `name` runs with (its own NATS user, with `auth`)."""
        if self.auth is None or not self.auth.users:
            return self.settings
        return self.auth.service_settings(name, self.settings)

    def build(self, name: str) -> Service:
        """The service `name`, not started, on this stack's store and its own settings."""
        return build_service(name, self.settings_of(name), store=self.store)

    async def start(self, names: Sequence[str] = EMBEDDED_SERVICES) -> None:
        """Build and start each named service, in order."""
        for name in names:
            service = self.build(name)
            await service.start()
            self.started[name] = service

    async def stop(self) -> None:
        """Stop everything in reverse order; one failure does not keep the rest running."""
        for name in reversed(list(self.started)):
            service = self.started.pop(name)
            try:
                await service.stop()
            except Exception:
                log.exception("stopping %s failed", name)


async def create_streams(
    settings: Settings, *, timeout: float = 15.0, upload_campaigns: tuple[str, ...] = ()
) -> None:
    """Create the streams as `settings`' user (the admin): services may only look them up.

    Each campaign in `upload_campaigns` also gets its upload bucket (its publisher may
    put objects there, not create buckets).
    """
    bus = Bus(settings, service="admin")
    try:
        await asyncio.wait_for(bus.connect(), timeout)
        for campaign in upload_campaigns:
            bucket = upload_bucket(settings, campaign)
            await ensure_upload_bucket(bus.js, bucket, max_bytes=settings.upload_bucket_max_bytes)
    except Exception as e:  # connection refused, TLS or auth failure, timeout
        raise BusError(
            f"creating streams {settings.stream} on {settings.nats_url} as "
            f"{settings.nats_user}: {type(e).__name__}: {e}"
        ) from e
    finally:
        await bus.stop()
