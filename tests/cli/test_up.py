"""`assay up --auth`: the server starts with per-service users, their env files (mode 0600)
written and named, never a password printed; `--all` runs each service as its own user."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import ConsumerConfig

from assay.bus import Bus
from assay.config import Settings
from assay.embedded import NatsServer, find_free_port
from assay.security import EmbeddedAuth
from assay.store import open_store, upload_bucket
from assay_cli.stack import EMBEDDED_SERVICES, Stack, create_streams
from assay_schemas import NotAuthenticated
from tests.deploy.test_compose_campaign import ONE_PROCESS

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
            "assay_cli",
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
        # Every user has an env file (its path printed); no password reaches the terminal.
        for user in ("admin", "cli", "runner", "judge", "publisher-c1"):
            env_file = home / "nats" / f"{user}.env"
            assert str(env_file) in out, out
            assert env_file.stat().st_mode & 0o777 == 0o600
        passwords = json.loads((home / "nats" / "passwords.json").read_text())
        assert not [u for u, pw in passwords.items() if pw in out], "a password was printed"
        assert "ASSAY_NATS_PASSWORD" not in out
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


def _up(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay_cli", "up", *args],
        env=dict(os.environ, ASSAY_HOME=str(home), COLUMNS="200"),
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("campaign", ["pub.*", "a b", ">", "-x", "ü"])
def test_up_refuses_a_publisher_that_is_no_campaign_id(tmp_path: Path, campaign: str) -> None:
    out = _up(tmp_path / "home", "--auth", "--port", str(find_free_port()), "--publisher", campaign)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "not a campaign id" in out.stderr
    assert "Traceback" not in out.stderr and "InvalidBucketName" not in out.stderr
    assert not (tmp_path / "home" / "nats").exists(), "nothing was written or started"


@pytest.fixture
def auth_stack(tmp_path: Path) -> Iterator[tuple[Settings, EmbeddedAuth]]:
    """The embedded server of `assay up --auth`, as `up` prepares it, streams made."""
    from assay.security import prepare_embedded

    settings = Settings(home=tmp_path / "home", state_dir=tmp_path / "state", instance="box1")
    secured = prepare_embedded(settings, auth=True, publisher_campaigns=("c1",))
    assert secured is not None
    server = NatsServer(settings.home / "nats", config_file=secured.config_file).start()
    settings = settings.model_copy(update={"nats_url": server.url})
    try:
        asyncio.run(
            create_streams(secured.settings_for("admin", settings), upload_campaigns=("c1",))
        )
        yield settings, secured
    finally:
        server.stop()


async def test_the_publishers_bucket_is_made_with_its_room(
    auth_stack: tuple[Settings, EmbeddedAuth],
) -> None:
    """`up --publisher`'s bucket holds no more than `upload_bucket_max_bytes`, and a put
    past it is refused rather than old objects dropped."""
    from nats.js.api import DiscardPolicy

    settings, secured = auth_stack
    admin = secured.settings_for("admin", settings)
    nc = await nats.connect(admin.nats_url, user=admin.nats_user, password=admin.nats_password)
    try:
        info = await nc.jetstream().stream_info(f"OBJ_{upload_bucket(settings, 'c1')}")
    finally:
        await nc.close()
    assert info.config.max_bytes == settings.upload_bucket_max_bytes == 10 * 2**30
    assert info.config.discard == DiscardPolicy.NEW


async def test_one_process_auth_stack_runs_each_service_as_its_own_user(
    auth_stack: tuple[Settings, EmbeddedAuth],
) -> None:
    settings, secured = auth_stack
    stack = Stack(settings=settings, store=open_store(settings), auth=secured)
    assert {n: stack.settings_of(n).nats_user for n in EMBEDDED_SERVICES} == {
        "sandbox-manager": "sandbox-manager",
        "runner": "runner",
        "rules": "judge",
        "jury": "judge",
        "aggregator": "aggregator",
    }
    await stack.start(["runner"])
    try:
        runner = stack.started["runner"]
        bus: Bus = runner.bus  # type: ignore[attr-defined]
        assert bus.settings.nats_user == "runner"
        nc = bus.broker.connection
        js = nc.jetstream(timeout=1)
        prefix = settings.subject_prefix
        # A verdict is the judges' to write: the runner's publish gets no PubAck.
        with pytest.raises(NatsTimeout):
            await js.publish(f"{prefix}.ev.JudgmentRecorded.c1.r1", b"{}")
        # Nor may it take over the aggregator's durable (and so read its work).
        with pytest.raises(NatsTimeout):
            await js.add_consumer(
                settings.stream,
                ConsumerConfig(durable_name="aggregator", filter_subject=f"{prefix}.ev.>"),
            )
        # What it writes, it may.
        ack = await js.publish(f"{prefix}.ev.RunFailed.c1.r1", b"{}")
        assert ack.seq >= 1
    finally:
        await stack.stop()


async def test_wrong_or_missing_credentials_are_one_line(
    auth_stack: tuple[Settings, EmbeddedAuth],
) -> None:
    settings, secured = auth_stack
    base = {**os.environ, "ASSAY_NATS_URL": settings.nats_url, "COLUMNS": "200"}
    publisher = {"ASSAY_NATS_USER": "publisher-c1"}
    publisher["ASSAY_NATS_PASSWORD"] = secured.passwords["publisher-c1"]
    for extra, who in (
        ({}, "a client without credentials"),
        ({"ASSAY_NATS_USER": "runner", "ASSAY_NATS_PASSWORD": "wrong"}, "user 'runner'"),
        # Right password, but a user that may not read the log: the server stays silent.
        (publisher, "user 'publisher-c1' may lack a permission"),
    ):
        started = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-m", "assay_cli", "events"],
            env={**base, **extra},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 2
        assert time.monotonic() - started < 20
        [line] = out.stderr.strip().splitlines()
        assert who in line, line
        assert "cli.env" in line and "Traceback" not in out.stderr


async def test_refused_credentials_are_told_by_their_class(
    auth_stack: tuple[Settings, EmbeddedAuth], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, _ = auth_stack
    monkeypatch.setattr(Bus, "connect_timeout", 10.0)
    wrong = settings.model_copy(update={"nats_user": "runner", "nats_password": "wrong"})
    for who, refused in (("user 'runner'", wrong), ("a client without credentials", settings)):
        with pytest.raises(NotAuthenticated, match=who):  # a BusError
            await Bus(refused, service="cli").connect()


def test_up_all_with_auth_starts_each_service_as_its_own_user(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "assay_cli",
            "up",
            "--all",
            "--auth",
            "--port",
            str(find_free_port()),
        ],
        env=dict(
            os.environ,
            ASSAY_HOME=str(home),
            ASSAY_STATE_DIR=str(tmp_path / "state"),
            COLUMNS="250",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        out = ""
        deadline = time.monotonic() + 30
        while "services:" not in out and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, out
            out += line
        assert "NATS users: sandbox-manager, runner, judge, judge, aggregator" in out, out
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
        assert "stopped" in rest and "Traceback" not in rest, rest
        # Every service connected and left: nothing was refused on the way.
        log = (home / "nats" / "nats-server.log").read_text()
        assert "Authorization Violation" not in log and "Permissions Violation" not in log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_the_deployment_test_compares_against_the_services_assay_run_embeds() -> None:
    """tests/deploy starts its one-process baseline without the CLI: the same services."""
    assert EMBEDDED_SERVICES == ONE_PROCESS
