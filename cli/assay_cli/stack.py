"""Every service in one process: the embedded default (`assay up --all`, `assay run`).

Deployed, each service runs as its own process (`assay serve NAME`); here they share an
event loop but still talk only through NATS and the blob store, exactly as when apart.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from assay.config import Settings
from assay.service import EMBEDDED_SERVICES, Service, build_service
from assay.store import BlobStore, open_store

if TYPE_CHECKING:
    from assay.security import EmbeddedAuth

__all__ = ["Stack"]

log = logging.getLogger("assay.stack")


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
