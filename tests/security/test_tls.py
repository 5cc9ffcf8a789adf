"""TLS is switched on by config: clients with the CA connect, clients without it cannot."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import nats
import pytest

from assay.bus import Bus
from assay.security import ServerTls

from .certs import make_pki
from .conftest import base_settings, start_secure

pytestmark = pytest.mark.timeout(30)


async def test_client_needs_the_ca_to_connect(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    tls = ServerTls(cert_file=pki.cert, key_file=pki.key)
    secure = start_secure(tmp_path, base_settings(tmp_path), tls=tls)
    try:
        # With ASSAY_NATS_TLS_CA set, the platform's own client connects and works.
        trusted = secure.settings("admin").model_copy(update={"nats_tls_ca": pki.ca})
        bus = Bus(trusted, service="admin")
        await asyncio.wait_for(bus.connect(), 10)
        info = await bus.js.stream_info(trusted.stream)
        assert info.config.name == trusted.stream
        await bus.stop()

        # Without it, the self-signed chain is not trusted: the handshake fails.
        untrusted = secure.settings("admin")
        with pytest.raises((ssl.SSLError, OSError, nats.errors.NoServersError)):
            await nats.connect(
                untrusted.nats_url,
                user="admin",
                password=secure.passwords["admin"],
                allow_reconnect=False,
                connect_timeout=2,
            )
        bus = Bus(untrusted, service="admin")
        with pytest.raises((ssl.SSLError, OSError, TimeoutError, nats.errors.NoServersError)):
            await asyncio.wait_for(bus.connect(), 3)
        await bus.stop()

        # A nats:// URL without the CA fails the same way: the server requires TLS.
        plain = untrusted.nats_url.replace("tls://", "nats://")
        with pytest.raises((ssl.SSLError, OSError, nats.errors.NoServersError)):
            await nats.connect(
                plain,
                user="admin",
                password=secure.passwords["admin"],
                allow_reconnect=False,
                connect_timeout=2,
            )
    finally:
        secure.server.stop()
