"""`assay up --auth`: the server starts with per-service users and prints their env lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nats
import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.embedded import find_free_port
from assay.store import upload_bucket

pytestmark = pytest.mark.timeout(40)


def _env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k.removeprefix("ASSAY_").lower(): v for k, v in pairs}


async def test_up_with_auth_serves_restricted_users(tmp_path: Path) -> None:
    home = tmp_path / "home"
    port = find_free_port()
    env = dict(os.environ, ASSAY_HOME=str(home), ASSAY_INSTANCE="box1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "assay",
            "up",
            "--auth",
            "--port",
            str(port),
            "--publisher",
            "c1",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 25
        out = ""
        assert proc.stdout is not None
        while "blob store:" not in out and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            out += line
        assert "ASSAY_NATS_USER=runner" in out, out
        assert (home / "nats" / "passwords.json").stat().st_mode & 0o777 == 0o600
        assert (home / "nats" / "server.conf").stat().st_mode & 0o777 == 0o600

        runner = Settings(**_env_file(home / "nats" / "runner.env"))  # type: ignore[arg-type]
        assert runner.nats_url == f"nats://127.0.0.1:{port}" and runner.nats_user == "runner"
        bus = Bus(runner, service="runner")
        await bus.connect()  # the streams exist: `up` created them as the admin
        try:
            info = await bus.js.stream_info(runner.stream)
            assert info.config.deny_delete
        finally:
            await bus.stop()

        # The publisher finds its upload bucket ready: it may put objects, not make buckets.
        publisher = Settings(**_env_file(home / "nats" / "publisher-c1.env"))  # type: ignore[arg-type]
        pub = Bus(publisher, service="publisher")
        await pub.connect()
        try:
            objects = await pub.js.object_store(upload_bucket(publisher, "c1"))
            await objects.put("0" * 64, b"")
        finally:
            await pub.stop()

        with pytest.raises(Exception, match=r"[Aa]uthorization"):
            await nats.connect(
                runner.nats_url, user="runner", password="wrong", allow_reconnect=False
            )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
