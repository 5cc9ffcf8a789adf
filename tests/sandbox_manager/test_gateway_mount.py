"""A sandbox with a gateway folder reaches the unix socket there at 127.0.0.1:18080 only."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay_sandbox_manager.backends import BubblewrapBackend, SandboxError, SandboxSpec

CLIENT = """
import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:18080/v1/ping", timeout=5).read().decode())
"""


@pytest.fixture
def spec() -> SandboxSpec:
    """Bubblewrap only (Docker does not bind a gateway folder yet)."""
    return SandboxSpec(cpu_seconds=30, memory_mb=768, max_processes=64, exec_timeout_s=30)


@pytest.fixture
def gateway_dir() -> Iterator[Path]:
    """A traversable host folder with an HTTP-ish unix socket server answering 'pong'."""
    folder = Path(tempfile.mkdtemp(prefix="gw-", dir="/var/tmp"))
    folder.chmod(0o711)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(folder / "model.sock"))
    (folder / "model.sock").chmod(0o666)
    server.listen()

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                with conn:
                    conn.recv(65536)
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\npong"
                    )

    threading.Thread(target=serve, daemon=True).start()
    yield folder
    server.close()
    shutil.rmtree(folder)


def test_gateway_socket_is_reached_through_loopback(
    bubblewrap_backend: BubblewrapBackend, spec: SandboxSpec, gateway_dir: Path
) -> None:
    sid = f"t-{uuid.uuid4().hex[:12]}"
    bubblewrap_backend.create(spec.model_copy(update={"gateway_dir": str(gateway_dir)}), sid, {})
    try:
        res = bubblewrap_backend.exec(sid, ["python3", "-c", CLIENT])
        assert (res.exit_code, res.stdout) == (0, b"pong\n"), res
        # A command's timeout sweep kills every process but PID 1: the forwarder lives on.
        assert bubblewrap_backend.exec(sid, "sleep 5", timeout_s=0.5).timed_out
        assert bubblewrap_backend.exec(sid, ["python3", "-c", CLIENT]).stdout == b"pong\n"
        # Read-only: the program cannot plant files in the host folder.
        assert bubblewrap_backend.exec(sid, "touch /run/gateway/x").exit_code != 0
        assert os.listdir(gateway_dir) == ["model.sock"]
    finally:
        bubblewrap_backend.destroy(sid)


def test_gateway_dir_must_be_a_real_folder(
    bubblewrap_backend: BubblewrapBackend, spec: SandboxSpec, gateway_dir: Path
) -> None:
    link = gateway_dir.with_name(gateway_dir.name + "-link")
    link.symlink_to(gateway_dir)
    try:
        for bad in ("relative/dir", str(link), str(gateway_dir / "missing")):
            with pytest.raises(SandboxError, match="gateway_dir"):
                bubblewrap_backend.create(
                    spec.model_copy(update={"gateway_dir": bad}), f"t-{uuid.uuid4().hex[:12]}", {}
                )
    finally:
        link.unlink()
