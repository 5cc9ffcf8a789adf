"""Session-wide real infrastructure: one nats-server, one S3 endpoint; per-test isolation."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.embedded import NatsServer, find_free_port

if TYPE_CHECKING:
    from assay_testing.scripted import ScriptedModelServer

pytest_plugins = ["tests.leakguard", "pytester"]
"""The leak guard fails the session when a test leaves an aiohttp session or NATS
connection open; pytester runs the guard's own test."""

_counter = itertools.count()


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """A real nats-server with JetStream for the whole test session."""
    with NatsServer(tmp_path_factory.mktemp("nats")) as server:
        yield server


def _state_root() -> Path:
    """Sandbox state must be traversable by sandbox uids: not under pytest's 0700 tmp."""
    root = Path("/var/tmp/assay-tests") / str(os.getpid())
    root.mkdir(parents=True, exist_ok=True)
    for p in (root.parent, root):
        p.chmod(0o711)
    return root


def isolated_settings(tmp: Path, *, name: str, state: str, **fields: Any) -> Settings:
    """Settings of one test: its own stream (`name` and a number), subject prefix, home
    and sandbox state (a `state`-prefixed folder), a short ack wait and three deliveries."""
    n = next(_counter)
    state_dir = Path(tempfile.mkdtemp(prefix=f"{state}{n}-", dir=_state_root()))
    state_dir.chmod(0o711)
    return Settings(
        state_dir=state_dir,
        home=tmp / "home",
        stream=f"{name.upper()}{n}",
        subject_prefix=f"{name.lower()}{n}",
        ack_wait_s=5.0,
        max_deliver=3,
        **fields,
    )


@pytest.fixture
def settings(nats_server: NatsServer, tmp_path: Path) -> Settings:
    """Settings with this test's own stream and subject prefix on the shared server."""
    return isolated_settings(tmp_path, name="t", state="state", nats_url=nats_server.url)


@pytest.fixture
async def bus(settings: Settings) -> AsyncIterator[Bus]:
    """A started bus on this test's stream."""
    b = Bus(settings, service="test")
    await b.start()
    try:
        yield b
    finally:
        await b.stop()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3 HTTP endpoint (moto's threaded server) on loopback."""
    from moto.server import ThreadedMotoServer

    port = find_free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def scripted(request: pytest.FixtureRequest) -> Iterator[ScriptedModelServer]:
    """A scripted model server serving the test module's `SCRIPTS` (none when it has none);
    a module that needs more of its server defines its own `scripted`."""
    from assay_testing.pipeline import scripted_server  # the model SDKs: only where used

    with scripted_server(getattr(request.module, "SCRIPTS", None)) as server:
        yield server
