"""Forbidden publishes are refused by the server; allowed ones are stored."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import nats
import nats.aio.msg
import pytest
from nats.aio.client import Client
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import ConsumerConfig

from assay.bus import Bus
from assay.config import Settings
from assay.contract import advisory_subject, lost_stream_name
from assay.security import permission_map
from assay.security.permissions import inbox_prefix

from .conftest import CAMPAIGN, SecureNats

pytestmark = pytest.mark.timeout(30)

Connect = Callable[[str], Awaitable[Client]]


@pytest.fixture
def errors() -> list[Exception]:
    """Asynchronous errors the server sent to this test's clients."""
    return []


@pytest.fixture
async def connect(
    secure: SecureNats, admin_bus: Bus, errors: list[Exception]
) -> AsyncIterator[Connect]:
    """Plain nats-py connections as any user (streams exist: the admin made them)."""
    clients: list[Client] = []

    async def on_error(e: Exception) -> None:
        errors.append(e)

    async def open_as(user: str) -> Client:
        nc = await nats.connect(
            secure.base.nats_url,
            user=user,
            password=secure.passwords[user],
            error_cb=on_error,
            allow_reconnect=False,
            inbox_prefix=inbox_prefix(user),
        )
        clients.append(nc)
        return nc

    yield open_as
    for nc in clients:
        await nc.close()


def subject(secure: SecureNats, event_type: str, campaign: str = "c1", run: str = "r1") -> str:
    return f"{secure.base.subject_prefix}.ev.{event_type}.{campaign}.{run}"


async def stored(admin_bus: Bus, secure: SecureNats) -> int:
    return (await admin_bus.js.stream_info(secure.base.stream)).state.messages


async def refused(nc: Client, subject: str) -> bool:
    """Whether a JetStream publish got no PubAck (the server dropped it)."""
    try:
        await nc.jetstream().publish(subject, b"{}", timeout=0.5)
    except NatsTimeout:
        return True
    return False


@pytest.mark.parametrize(
    ("user", "forbidden"),
    [
        (
            "runner",
            [
                "JudgmentRecorded",
                "JudgmentFailed",
                "JudgeRegistered",
                "ArtifactsSealed",
                "CampaignStopped",
            ],
        ),
        (
            "sandbox-manager",
            ["RunRequested", "AgentStepLogged", "AgentFinished", "JudgmentRecorded"],
        ),
        ("judge", ["RunRequested", "ArtifactsSealed", "CampaignStarted", "AgentFinished"]),
        (
            "aggregator",
            ["JudgmentRecorded", "CampaignStarted", "TaskSubmitted", "RunFailed", "RunCancelled"],
        ),
        # The cli may request runs: `assay retry` asks for a new attempt (signed as the cli).
        # It may carry reviewers' verdicts (JudgmentRecorded), which count only when signed
        # by an enrolled reviewer (tests/review/test_human_attacks.py).
        ("cli", ["SandboxReady", "ArtifactsSealed", "AgentFinished", "JudgeRegistered"]),
    ],
)
async def test_services_cannot_publish_other_services_events(
    secure: SecureNats, admin_bus: Bus, connect: Connect, user: str, forbidden: list[str]
) -> None:
    nc = await connect(user)
    for event_type in forbidden:
        assert await refused(nc, subject(secure, event_type)), f"{user} published {event_type}"
    assert await stored(admin_bus, secure) == 0


@pytest.mark.parametrize(
    ("user", "allowed"),
    [
        ("runner", ["RunRequested", "AgentStepLogged", "AgentFinished", "RunFailed"]),
        ("sandbox-manager", ["SandboxReady", "ArtifactsSealed", "RunFailed"]),
        ("judge", ["JudgeRegistered", "JudgmentRecorded", "JudgmentFailed"]),
        ("cli", ["CampaignStarted", "TaskSubmitted"]),
    ],
)
async def test_services_publish_their_own_events(
    secure: SecureNats, admin_bus: Bus, connect: Connect, user: str, allowed: list[str]
) -> None:
    nc = await connect(user)
    for event_type in allowed:
        assert not await refused(nc, subject(secure, event_type)), f"{user} refused {event_type}"
    assert await stored(admin_bus, secure) == len(allowed)


async def test_external_publisher_submits_only_tasks_to_its_campaign(
    secure: SecureNats, admin_bus: Bus, connect: Connect
) -> None:
    nc = await connect(f"publisher-{CAMPAIGN}")
    assert not await refused(nc, subject(secure, "TaskSubmitted", CAMPAIGN, "-"))
    assert await refused(nc, subject(secure, "TaskSubmitted", "other", "-"))
    assert await refused(nc, subject(secure, "TaskSubmitted", CAMPAIGN, "r1"))
    assert await refused(nc, subject(secure, "CampaignStarted", CAMPAIGN, "-"))
    assert await refused(nc, subject(secure, "RunRequested", CAMPAIGN, "r1"))
    assert await stored(admin_bus, secure) == 1


async def test_no_user_reads_another_users_replies(
    secure: SecureNats, admin_bus: Bus, connect: Connect, errors: list[Exception]
) -> None:
    """The publisher listens on every inbox while the runner works: it captures nothing."""
    spy = await connect(f"publisher-{CAMPAIGN}")
    captured: list[bytes] = []

    async def capture(msg: nats.aio.msg.Msg) -> None:
        captured.append(msg.data)

    for pattern in ("_INBOX.>", f"{inbox_prefix('runner')}.>", ">"):
        await spy.subscribe(pattern, cb=capture)
    await spy.flush()
    runner = await connect("runner")
    for _ in range(5):  # PubAcks and JetStream API replies go to the runner's inbox
        assert not await refused(runner, subject(secure, "RunRequested"))
        await runner.jetstream().stream_info(secure.base.stream)
    await asyncio.sleep(0.3)
    assert captured == []
    violations = [e for e in errors if "permissions violation" in str(e).lower()]
    assert len(violations) >= 3, errors


async def test_services_cannot_take_over_other_durables_or_streams(
    secure: SecureNats, admin_bus: Bus, connect: Connect
) -> None:
    runner = await connect("runner")
    js = runner.jetstream(timeout=0.5)
    stream = secure.base.stream
    events = f"{secure.base.subject_prefix}.ev.>"
    # Another service's durable: refused (no reply from the API within the timeout).
    with pytest.raises(NatsTimeout):
        await js.add_consumer(
            stream,
            ConsumerConfig(name="aggregator", durable_name="aggregator", filter_subject=events),
        )
    with pytest.raises(NatsTimeout):
        await js.delete_stream(stream)
    with pytest.raises(NatsTimeout):
        await js.purge_stream(stream)
    # Nor through the ephemeral create subject replays use: the server refuses a
    # durable name there.
    body = {
        "stream_name": stream,
        "config": {"durable_name": "aggregator", "filter_subject": events},
    }
    reply = await runner.request(
        f"$JS.API.CONSUMER.CREATE.{stream}", json.dumps(body).encode(), timeout=2
    )
    assert "error" in json.loads(reply.data)
    with pytest.raises(nats.js.errors.NotFoundError):
        await js.consumer_info(stream, "aggregator")
    # Its own durable: allowed.
    info = await js.add_consumer(
        stream,
        ConsumerConfig(name="runner-tasks", durable_name="runner-tasks", filter_subject=events),
    )
    assert info.name == "runner-tasks"


async def test_only_the_sandbox_manager_serves_sandbox_requests(
    secure: SecureNats, admin_bus: Bus, connect: Connect, errors: list[Exception]
) -> None:
    rpc = f"{secure.base.subject_prefix}.rpc.sandbox.sm1"
    judge = await connect("judge")
    spy = await judge.subscribe(rpc)
    for _ in range(100):  # the refusal arrives asynchronously, after the flush's PONG
        if any("permissions violation for subscription" in str(e).lower() for e in errors):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"the judge's subscription was not refused: {errors}")
    runner = await connect("runner")
    # The judge's subscription was refused, so nobody answers the runner's request (the
    # server says "no responders"; on a loaded machine the request may time out first).
    with pytest.raises((nats.errors.NoRespondersError, nats.errors.TimeoutError)):
        await runner.request(rpc, b"{}", timeout=2)
    assert spy.pending_msgs == 0, "the refused subscriber must never see a sandbox request"
    manager = await connect("sandbox-manager")

    async def answer(msg: nats.aio.msg.Msg) -> None:
        await msg.respond(b"pong")

    await manager.subscribe(rpc, cb=answer)
    await manager.flush(timeout=1)
    assert await answered(runner, rpc) == b"pong"


async def answered(nc: Client, rpc: str, within: float = 10.0) -> bytes:
    """The first reply to a request on `rpc`, asking again while the server has no responder.

    Under CI load the server has been seen to answer "no responders" for a subscription
    whose SUB it had already acknowledged (flush returned); what this test proves is that
    the manager, and only the manager, is served, so a late interest is retried rather than
    failed. A refusal would never turn into an answer, however long we ask.
    """
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            return (await nc.request(rpc, b"{}", timeout=2)).data
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


def test_permission_map_is_pure_and_prefixed() -> None:
    s = Settings(stream="X", subject_prefix="p")
    users = permission_map(s, publisher_campaigns=("c",))
    assert users == permission_map(s, publisher_campaigns=("c",))
    for name, perms in users.items():
        if name == "admin":
            continue
        for subj in perms.publish:
            assert subj.startswith(
                (
                    "p.",
                    "$JS.API.",
                    "$JS.ACK.X.",
                    "$JS.ACK.X_LOST.",
                    "$JS.FC.X.",
                    "$JS.FC.X_DLQ.",
                    "$JS.FC.OBJ_X_UP_c.",
                    "$O.X_UP_c.",
                )
            ), (name, subj)
            assert "ASSAY" not in subj
    assert users["publisher-c"].publish[0] == "p.ev.TaskSubmitted.c.-"
    # The aggregator logs one event type, its stopping decision, and no other.
    events = [subj for subj in users["aggregator"].publish if ".ev." in subj]
    assert events == ["p.ev.CampaignStopped.*.*"]


async def test_a_service_hears_only_its_own_durables_lost_deliveries(
    secure: SecureNats, admin_bus: Bus, connect: Connect, errors: list[Exception]
) -> None:
    """The max-deliveries advisories of its own durable are the runner's to pull from the
    stream that keeps them (the bus dead-letters what each names, read by a stream get);
    another service's, and the advisory subjects themselves, are refused."""
    stream = secure.base.stream
    lost = lost_stream_name(stream)
    runner = await connect("runner")
    js = runner.jetstream(timeout=0.5)
    ack = await admin_bus.js.publish(subject(secure, "SandboxReady"), b"{}", stream=stream)
    advisory = json.dumps({"stream": stream, "consumer": "runner-runs", "stream_seq": ack.seq})
    await admin_bus.js.publish(advisory_subject(stream, "runner-runs"), advisory.encode())
    own = await js.pull_subscribe(
        advisory_subject(stream, "runner-runs"), durable="runner-runs", stream=lost
    )
    [heard] = await own.fetch(1, timeout=2)
    await heard.ack()
    stored = await js.get_msg(stream, seq=json.loads(heard.data)["stream_seq"])
    assert (stored.seq, stored.data) == (ack.seq, b"{}")
    await asyncio.sleep(0.3)
    assert not [e for e in errors if "permissions violation" in str(e).lower()], errors
    with pytest.raises(NatsTimeout):  # another service's durable there: no reply
        await js.pull_subscribe(
            advisory_subject(stream, "aggregator"), durable="aggregator", stream=lost
        )
    spy = await runner.subscribe(advisory_subject(stream, "runner-runs"))
    for _ in range(100):  # the refusal arrives asynchronously
        if any("permissions violation for subscription" in str(e).lower() for e in errors):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"the runner subscribed to the advisories themselves: {errors}")
    assert spy.pending_msgs == 0
