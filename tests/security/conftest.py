"""A real nats-server per test, started with the rendered least-privilege config."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from assay.bus import Bus
from assay.config import Settings
from assay.embedded import NatsServer
from assay.security import Permissions, ServerTls, permission_map, render_config
from assay.security.permissions import inbox_prefix
from tests.conftest import isolated_settings

CAMPAIGN = "open"
"""The one campaign the external publisher may submit tasks to."""
INSTANCE = "sm1"


@dataclass(kw_only=True)
class SecureNats:
    """A server whose users are exactly those of `permission_map`."""

    server: NatsServer
    base: Settings
    users: dict[str, Permissions]
    passwords: dict[str, str]

    def settings(self, user: str) -> Settings:
        """The base settings, connecting as `user`."""
        return self.base.model_copy(
            update={"nats_user": user, "nats_password": self.passwords[user]}
        )

    async def connect_as(self, user: str, **options: Any) -> Client:
        """A bare NATS connection as `user` (its own inbox prefix, no reconnects)."""
        return await nats.connect(
            self.base.nats_url,
            user=user,
            password=self.passwords[user],
            inbox_prefix=inbox_prefix(user),
            allow_reconnect=False,
            **options,
        )

    def violations(self) -> list[str]:
        """Permission violations the server logged so far."""
        text = self.server.log_path.read_text(errors="replace")
        return [line for line in text.splitlines() if "Violation" in line]


def start_secure(tmp: Path, base: Settings, tls: ServerTls | None = None) -> SecureNats:
    """Render the config for `base`'s stream and prefix and start a server with it."""
    users = permission_map(base, publisher_campaigns=(CAMPAIGN,), instances=(INSTANCE,))
    passwords = {u: f"pw-{u}-{i}" for i, u in enumerate(users)}
    config = tmp / "nats.conf"
    config.write_text(render_config(users, passwords, tls=tls))
    server = NatsServer(tmp / "nats", config_file=config).start()
    scheme = "tls" if tls else "nats"
    base = base.model_copy(update={"nats_url": f"{scheme}://127.0.0.1:{server.port}"})
    return SecureNats(server=server, base=base, users=users, passwords=passwords)


def base_settings(tmp: Path) -> Settings:
    """Settings of one test (own stream, prefix, home and sandbox state)."""
    return isolated_settings(tmp, name="sec", state="sec", instance=INSTANCE)


@pytest.fixture
def secure(tmp_path: Path) -> Iterator[SecureNats]:
    """A least-privilege server for this test only."""
    nats = start_secure(tmp_path, base_settings(tmp_path))
    try:
        yield nats
    finally:
        nats.server.stop()


@pytest.fixture
async def admin_bus(secure: SecureNats) -> AsyncIterator[Bus]:
    """The admin's bus: it creates the streams (services may only look them up)."""
    bus = Bus(secure.settings("admin"), service="admin")
    await bus.connect()
    try:
        yield bus
    finally:
        await bus.stop()
