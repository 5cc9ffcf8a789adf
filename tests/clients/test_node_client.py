"""The Node.js publisher example against a running stack, open and with least-privilege users.

examples/clients/node/publish.mjs uploads an attachment, publishes TaskSubmitted built from
the JSON Schema and waits for the runner's answer; here it must be accepted and its run
judged, and a task whose blob was never uploaded must be refused as missing_blob.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.security.permissions import publisher_user
from assay.security.signing import ensure_operator, signer_for, trust_for
from assay.store import LocalBlobStore, ensure_upload_bucket, upload_bucket
from assay_schemas import JudgmentRecorded, Producer, TaskSubmitted
from assay_testing.events import campaign_started
from assay_testing.pipeline import SCRIPTED_KEY, campaign, scripted_agent, wait_for_events
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply
from tests.judge.cases import judge_spec, reading_judge, verdict
from tests.security.conftest import CAMPAIGN, SecureNats
from tests.security.stack import connected, restricted_services

pytestmark = pytest.mark.timeout(240)  # the first run installs the npm packages

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clients" / "node"
SCHEMA = EXAMPLE.parents[2] / "schemas" / "json" / "TaskSubmitted.json"

AGENT = ScriptedSequence(
    [
        ScriptReply.call("bash", {"command": "mkdir -p out && wc -l data.csv > out/n.txt"}),
        ScriptReply.call("submit", {"answer": "Counted the rows: out/n.txt."}),
    ]
)
JUDGE = reading_judge([("list_files", {})], verdict(8, files=["out/n.txt"]))


@pytest.fixture(scope="session")
def node_publisher() -> Path:
    """publish.mjs beside its installed packages, in a cache folder keyed by the lock file
    (outside the repository; npm's own cache is kept there too)."""
    # `make test` installs them (scripts/setup-host.sh test): missing is a broken set-up,
    # which must fail, not pass as a skip.
    assert shutil.which("node") and shutil.which("npm"), (
        "node and npm are missing: run `make test` (scripts/setup-host.sh test installs them)"
    )
    lock = (EXAMPLE / "package-lock.json").read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "assay-tests"
    folder = cache / f"node-publisher-{hashlib.sha256(lock).hexdigest()[:16]}"
    stamp = folder / ".installed"
    if not stamp.exists():
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(EXAMPLE / name, folder / name)
        subprocess.run(
            [
                "npm",
                "ci",
                "--cache",
                str(cache / "npm"),
                "--no-audit",
                "--no-fund",
                "--prefer-offline",
                "--loglevel=error",
            ],
            cwd=folder,
            check=True,
            timeout=180,
        )
        stamp.touch()
    shutil.copy(EXAMPLE / "publish.mjs", folder / "publish.mjs")
    return folder / "publish.mjs"


@pytest.fixture
def scripted() -> Iterator[ScriptedModelServer]:
    """Agent and judge models on one scripted server."""
    os.environ[SCRIPTED_KEY] = "scripted"
    with ScriptedModelServer({"agent": AGENT, "judge": JUDGE}) as server:
        yield server


@dataclass(kw_only=True)
class Publisher:
    """How the Node script reaches the stack: the settings' server, stream and prefix,
    optionally as a NATS user (its password passed in the environment, not argv)."""

    script: Path
    settings: Settings
    user: str | None = None
    password: str | None = None
    signing_key: Path | None = None
    """Folder holding `publisher-<campaign>.seed` and `.enrollment` (`assay keys enroll`)."""

    async def submit(self, task_id: str, *files: str) -> tuple[int, dict[str, object]]:
        """Run publish.mjs; its exit status and the answer it printed."""
        s = self.settings
        # Only what is passed here: no connection settings of the test's own environment.
        env = {k: v for k, v in os.environ.items() if "NATS_" not in k}
        args = ["--server", s.nats_url, "--stream", s.stream, "--prefix", s.subject_prefix]
        if self.user:
            args += ["--user", self.user]
            env["NATS_PASSWORD"] = self.password or ""
        if self.signing_key:
            args += ["--signing-key", str(self.signing_key)]
        proc = await asyncio.create_subprocess_exec(
            "node",
            str(self.script),
            *args,
            "--schema",
            str(SCHEMA),
            "--campaign",
            CAMPAIGN,
            "--task-id",
            task_id,
            "--prompt",
            "Count the rows of data.csv.",
            *files,
            "--timeout",
            "20",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode in (0, 3), err.decode()
        assert proc.returncode is not None
        return proc.returncode, json.loads(out.decode().strip().splitlines()[-1])


async def submit_and_follow(
    publisher: Publisher,
    cli: Bus,
    last_submission: Callable[[], Awaitable[dict[str, str]]],
    data: Path,
    missing: Path,
) -> None:
    """An uploaded attachment is accepted and judged; a never-uploaded one is refused."""
    code, accepted = await publisher.submit("rows", "--attach", str(data))
    assert (code, accepted["event_type"]) == (0, "TaskAccepted"), accepted
    assert accepted["task_id"] == "rows" and accepted["run_ids"]
    events = await wait_for_events(
        cli, lambda evs: any(isinstance(e, JudgmentRecorded) for e in evs), timeout=60
    )
    [submitted] = [e for e in events if isinstance(e, TaskSubmitted)]
    assert submitted.event_id == accepted["submission"]
    assert submitted.producer.service == "node-publisher"
    [judged] = [e for e in events if isinstance(e, JudgmentRecorded)]
    assert judged.run_id in accepted["run_ids"]  # type: ignore[operator]

    code, rejected = await publisher.submit("ghost", "--declare-only", str(missing))
    assert (code, rejected["event_type"], rejected["reason"]) == (3, "TaskRejected", "missing_blob")
    assert rejected["task_id"] == "ghost"
    # Published with its event id as Nats-Msg-Id, so a retried publish is stored once.
    assert (await last_submission())["Nats-Msg-Id"] == rejected["submission"]


def task_files(tmp: Path) -> tuple[Path, Path]:
    """The attachment to upload and one that is never uploaded."""
    data, missing = tmp / "data.csv", tmp / "missing" / "data.csv"
    data.write_text("a,b\n1,2\n3,4\n")
    missing.parent.mkdir()
    missing.write_text("never uploaded\n")
    return data, missing


async def start_campaign(cli: Bus, scripted: ScriptedModelServer) -> None:
    """The campaign the outside system submits to, as an operator would start it."""
    judge = judge_spec("j1", "judge", scripted.openai_base_url)
    spec = campaign(
        CAMPAIGN, [scripted_agent("agent", "agent", scripted.openai_base_url)], judges=[judge]
    )
    producer = Producer(service="cli", version="1")
    await cli.publish(campaign_started(spec, producer=producer))


def last_submission_of(bus: Bus) -> Callable[[], Awaitable[dict[str, str]]]:
    """Headers of the campaign's latest stored TaskSubmitted."""
    subject = bus.subjects.event("TaskSubmitted", CAMPAIGN, "-")

    async def headers() -> dict[str, str]:
        msg = await bus.js.get_last_msg(bus.settings.stream, subject)
        return dict(msg.headers or {})

    return headers


async def test_node_publisher_on_the_open_embedded_stack(
    settings: Settings, tmp_path: Path, node_publisher: Path, scripted: ScriptedModelServer
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    judge = judge_spec("j1", "judge", scripted.openai_base_url)
    data, missing = task_files(tmp_path)
    async with restricted_services(lambda _user: settings, store, judges=[judge]):
        cli = await connected(settings, "cli")
        try:
            await start_campaign(cli, scripted)
            # Without auth the script creates the upload bucket itself.
            publisher = Publisher(script=node_publisher, settings=settings)
            await submit_and_follow(publisher, cli, last_submission_of(cli), data, missing)
        finally:
            await cli.stop()
    assert store.get_bytes(hashlib.sha256(data.read_bytes()).hexdigest()) == data.read_bytes()


async def test_node_publisher_as_the_least_privilege_publisher_user(
    secure: SecureNats,
    admin_bus: Bus,
    tmp_path: Path,
    node_publisher: Path,
    scripted: ScriptedModelServer,
) -> None:
    from assay_aggregator.rebuild import fold_stream

    # What `assay up --auth --publisher open` does: an operator key (services sign their
    # events), and the admin makes the upload bucket.
    ensure_operator(secure.base)
    await ensure_upload_bucket(admin_bus.js, upload_bucket(secure.base, CAMPAIGN))
    # The operator enrolls the outside system's key (`assay keys enroll publisher-open --out`):
    # it signs its submissions, so the report counts them like any service's events.
    keys = tmp_path / "publisher-keys"
    keys.mkdir()
    assert signer_for(secure.base, publisher_user(CAMPAIGN)) is not None
    for suffix in (".seed", ".enrollment"):
        name = f"{publisher_user(CAMPAIGN)}{suffix}"
        (keys / name).write_bytes((secure.base.home / "keys" / name).read_bytes())
    store = LocalBlobStore(secure.base.blob_dir)
    judge = judge_spec("j1", "judge", scripted.openai_base_url)
    data, missing = task_files(tmp_path)
    user = publisher_user(CAMPAIGN)
    async with restricted_services(secure.settings, store, judges=[judge]):
        cli = await connected(secure.settings("cli"), "cli")
        try:
            await start_campaign(cli, scripted)
            publisher = Publisher(
                script=node_publisher,
                settings=secure.base,
                user=user,
                password=secure.passwords[user],
                signing_key=keys,
            )
            await submit_and_follow(publisher, cli, last_submission_of(admin_bus), data, missing)
        finally:
            await cli.stop()
    assert secure.violations() == []
    # With signatures checked, everything counts: the publisher's submissions are signed by
    # its enrolled key, for its own campaign.
    state = await fold_stream(
        admin_bus.js, secure.base.stream, admin_bus.subjects.events, trust=trust_for(secure.base)
    )
    assert [v for v in state.verdicts.values()], state.refused
    assert state.refused == {}, state.refused
