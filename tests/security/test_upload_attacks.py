"""A publisher's own upload bucket, turned against the runner: metadata that is not an
object's, a link into another campaign's bucket, an object larger than the task declares,
a chunk subject with a wildcard. Each submission is answered TaskRejected with the reason,
nothing of it reaches the blob store, and the runner goes on admitting."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import nats
import nats.aio.msg
import pytest
from nats.js import JetStreamContext

from assay.bus import Bus
from assay.config import Settings
from assay.security.permissions import publisher_user
from assay.store import LocalBlobStore, ensure_upload_bucket, upload_blob, upload_bucket
from assay_schemas import FileRef, Producer, Task
from assay_testing.events import campaign_started, task_submitted
from assay_testing.pipeline import campaign, scripted_agent

from .conftest import CAMPAIGN, SecureNats

pytestmark = pytest.mark.timeout(60)

PRODUCER = Producer(service="outside", version="1")
DATA = b"a,b\n1,2\n"
SHA = hashlib.sha256(DATA).hexdigest()


@dataclass
class Publisher:
    """The campaign's outside publisher, its own user, and the answers it hears."""

    js: JetStreamContext
    base: Settings
    store: LocalBlobStore
    answers: dict[str, dict[str, Any]]

    @property
    def bucket(self) -> str:
        return upload_bucket(self.base, CAMPAIGN)

    async def meta(self, name: str, body: dict[str, Any] | bytes) -> None:
        """Write an object's metadata by hand, as any NATS client may."""
        token = base64.urlsafe_b64encode(name.encode()).decode()
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        await self.js.publish(f"$O.{self.bucket}.M.{token}", data, headers={"Nats-Rollup": "sub"})

    async def chunk(self, nuid: str, data: bytes) -> None:
        await self.js.publish(f"$O.{self.bucket}.C.{nuid}", data)

    async def submit(self, task_id: str, sha256: str, size: int) -> dict[str, Any]:
        """Submit a task with one attachment; the runner's answer to it."""
        ref = FileRef(path="d.csv", sha256=sha256, size=size)
        task = Task(task_id=task_id, prompt="p", attachments=[ref])
        event = task_submitted(CAMPAIGN, task, producer=PRODUCER)
        subject = f"{self.base.subject_prefix}.ev.TaskSubmitted.{CAMPAIGN}.-"
        await self.js.publish(subject, event.model_dump_json().encode(), stream=self.base.stream)
        for _ in range(200):
            if task_id in self.answers:
                return self.answers[task_id]
            await asyncio.sleep(0.05)
        raise AssertionError(f"no answer to {task_id}")


@pytest.fixture
async def publisher(secure: SecureNats, admin_bus: Bus) -> AsyncIterator[Publisher]:
    from assay_runner.service import build as build_runner

    base = secure.base
    await ensure_upload_bucket(admin_bus.js, upload_bucket(base, CAMPAIGN))
    await ensure_upload_bucket(admin_bus.js, upload_bucket(base, "other"))
    spec = campaign(CAMPAIGN, [scripted_agent("a1", "m", "http://127.0.0.1:9")])
    await admin_bus.publish(campaign_started(spec, producer=PRODUCER))
    user = publisher_user(CAMPAIGN)
    nc = await secure.connect_as(user)
    store = LocalBlobStore(base.blob_dir)
    runner = build_runner(secure.settings("runner"), store=store)
    await runner.start()
    answers: dict[str, dict[str, Any]] = {}

    async def hear(msg: nats.aio.msg.Msg) -> None:
        answer = json.loads(msg.data)
        answers[answer["task_id"]] = answer

    try:
        for kind in ("TaskAccepted", "TaskRejected"):
            await nc.subscribe(f"{base.subject_prefix}.ev.{kind}.{CAMPAIGN}.-", cb=hear)
        yield Publisher(nc.jetstream(timeout=2), base, store, answers)
    finally:
        await runner.stop()
        await nc.close()


async def _still_admits(publisher: Publisher) -> None:
    """A good upload and submission after the attack is accepted."""
    good = b"x,y\n3,4\n"
    info = await upload_blob(publisher.js, publisher.bucket, good)
    answer = await publisher.submit("after", info.sha256, len(good))
    assert answer["event_type"] == "TaskAccepted", answer
    assert publisher.store.get_bytes(info.sha256) == good


def _rejected(answer: dict[str, Any], *words: str) -> None:
    assert answer["event_type"] == "TaskRejected", answer
    assert answer["reason"] == "blob_mismatch", answer
    for word in words:
        assert word in answer["detail"], answer


async def test_metadata_that_is_no_object_is_refused(publisher: Publisher) -> None:
    await publisher.meta(SHA, b"\xff not json")
    _rejected(await publisher.submit("garbage", SHA, len(DATA)), "metadata")
    assert not publisher.store.exists(SHA)
    await _still_admits(publisher)


async def test_a_link_into_another_campaigns_bucket_is_not_followed(
    publisher: Publisher, admin_bus: Bus
) -> None:
    """The other campaign's bytes, named by their hash, must not become this one's."""
    other = upload_bucket(publisher.base, "other")
    await upload_blob(admin_bus.js, other, DATA)
    await publisher.meta(
        SHA,
        {
            "name": SHA,
            "bucket": publisher.bucket,
            "nuid": "",
            "options": {"link": {"bucket": other, "name": SHA}},
        },
    )
    _rejected(await publisher.submit("link", SHA, len(DATA)), "link")
    assert not publisher.store.exists(SHA)
    await _still_admits(publisher)


@pytest.mark.parametrize("claimed", ["declared", "larger"])
async def test_an_object_larger_than_declared_is_refused_unread(
    publisher: Publisher, claimed: str
) -> None:
    """Its metadata may say the declared size or the true one: either way no more than
    the declared bytes are read."""
    chunk = b"9" * 500_000
    for _ in range(6):
        await publisher.chunk("N1", chunk)
    size = len(DATA) if claimed == "declared" else 6 * len(chunk)
    await publisher.meta(
        SHA, {"name": SHA, "bucket": publisher.bucket, "nuid": "N1", "size": size, "chunks": 1}
    )
    _rejected(await publisher.submit(f"big-{claimed}", SHA, len(DATA)), "bytes")
    assert not publisher.store.exists(SHA)
    await _still_admits(publisher)


async def test_a_wildcard_in_the_chunk_subject_is_refused(publisher: Publisher) -> None:
    await publisher.chunk("N2", DATA)
    await publisher.meta(
        SHA, {"name": SHA, "bucket": publisher.bucket, "nuid": ">", "size": len(DATA)}
    )
    _rejected(await publisher.submit("wildcard", SHA, len(DATA)), "nuid")
    assert not publisher.store.exists(SHA)
    await _still_admits(publisher)


async def test_a_bucket_holds_no_more_than_its_room(secure: SecureNats, admin_bus: Bus) -> None:
    """A publisher cannot fill JetStream's disk (and starve the event log) through its
    bucket: a put past the bucket's room is refused, and what was stored stays."""
    base = secure.base
    bucket = upload_bucket(base, CAMPAIGN)
    await ensure_upload_bucket(admin_bus.js, bucket, max_bytes=300_000)
    user = publisher_user(CAMPAIGN)
    nc = await secure.connect_as(user)
    try:
        js = nc.jetstream(timeout=2)
        small = await upload_blob(js, bucket, b"kept\n")
        # Refused by the server (nats-py's clean-up after it, a purge, is not the
        # publisher's to make: that times out too).
        with pytest.raises(nats.errors.Error):
            await upload_blob(js, bucket, b"9" * 400_000)
        state = (await admin_bus.js.stream_info(f"OBJ_{bucket}")).state
        assert state.bytes <= 300_000
        objects = await admin_bus.js.object_store(bucket)  # a publisher may not read
        assert (await objects.get(small.sha256)).data == b"kept\n"
    finally:
        await nc.close()


def test_buckets_are_made_with_the_settings_room() -> None:
    assert Settings().upload_bucket_max_bytes == 10 * 2**30
    assert Settings(upload_bucket_max_bytes=0).upload_bucket_max_bytes == 0
