"""A sandbox with a gateway folder reaches the unix socket there at 127.0.0.1:18080 only, and
a runtime extension is bound read-only at /opt, on both backends."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay_sandbox_manager import extension
from assay_sandbox_manager.backends import SandboxBackend, SandboxError, SandboxSpec

ELSEWHERE = """
import socket
for address in [("10.0.0.1", 80), ("1.1.1.1", 443), ("172.17.0.1", 2375)]:
    try:
        socket.create_connection(address, timeout=2)
        print("reached", address)
    except OSError:
        pass
print("unreachable")
"""
CLIENT = """
import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:18080/v1/ping", timeout=5).read().decode())
"""


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
    backend: SandboxBackend, spec: SandboxSpec, gateway_dir: Path
) -> None:
    sid = f"t-{uuid.uuid4().hex[:12]}"
    backend.create(spec.model_copy(update={"gateway_dir": str(gateway_dir)}), sid, {})
    try:
        res = backend.exec(sid, ["python3", "-c", CLIENT])
        assert (res.exit_code, res.stdout) == (0, b"pong\n"), res
        # A command's timeout sweep kills every process but the resident: the forwarder
        # (a thread of the resident) lives on.
        assert backend.exec(sid, "sleep 5", timeout_s=0.5).timed_out
        assert backend.exec(sid, ["python3", "-c", CLIENT]).stdout == b"pong\n"
        # Read-only: the program cannot plant files in the host folder.
        assert backend.exec(sid, "touch /run/gateway/x").exit_code != 0
        assert os.listdir(gateway_dir) == ["model.sock"]
        # Only the loopback port: no other address, the host's included.
        res = backend.exec(sid, ["python3", "-c", ELSEWHERE])
        assert res.stdout == b"unreachable\n", res
    finally:
        backend.destroy(sid)


def test_extension_is_bound_read_only_on_the_path(
    backend: SandboxBackend,
    spec: SandboxSpec,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = Path(tempfile.mkdtemp(prefix="ext-cache-", dir="/var/tmp"))
    cache.chmod(0o755)
    monkeypatch.setenv("ASSAY_SANDBOX_CACHE", str(cache))
    try:
        # A built extension as ensure_extension leaves it: found by hash, not rebuilt.
        folder = cache / f"ext-{extension.extension_hash(['probe'])}"
        (folder / "assay-ext" / "bin").mkdir(parents=True)
        (folder / "assay-ext" / "probe_mod.py").write_text("WHO = 'extension'\n")
        tool = folder / "assay-ext" / "bin" / "probe-tool"
        tool.write_text("#!/bin/sh\necho tool-ran\n")
        (folder / ".assay-extension-complete").write_text('["probe"]\n')
        subprocess.run(["chmod", "-R", "a+rX", str(cache)], check=True)
        tool.chmod(0o755)
        sid = f"t-{uuid.uuid4().hex[:12]}"
        backend.create(spec.model_copy(update={"packages": ["probe"]}), sid, {})
        try:
            res = backend.exec(sid, "python3 -c 'import probe_mod; print(probe_mod.WHO)'")
            assert res.stdout == b"extension\n", res
            assert backend.exec(sid, "probe-tool").stdout == b"tool-ran\n"
            assert backend.exec(sid, "touch /opt/assay-ext/x").exit_code != 0
        finally:
            backend.destroy(sid)
    finally:
        shutil.rmtree(cache)


def test_gateway_dir_must_be_a_real_folder(
    backend: SandboxBackend, spec: SandboxSpec, gateway_dir: Path
) -> None:
    link = gateway_dir.with_name(gateway_dir.name + "-link")
    link.symlink_to(gateway_dir)
    try:
        for bad in ("relative/dir", str(link), str(gateway_dir / "missing")):
            with pytest.raises(SandboxError, match="gateway_dir"):
                backend.create(
                    spec.model_copy(update={"gateway_dir": bad}), f"t-{uuid.uuid4().hex[:12]}", {}
                )
    finally:
        link.unlink()
