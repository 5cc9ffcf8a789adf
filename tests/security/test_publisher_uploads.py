"""An outside publisher with only its own user: upload, submit, hear the answer."""

from __future__ import annotations

import asyncio
import hashlib
import json

import nats
import nats.aio.msg
import pytest
from nats.errors import TimeoutError as NatsTimeout

from assay.bus import Bus
from assay.security.permissions import publisher_user
from assay.store import LocalBlobStore, ensure_upload_bucket, upload_bucket
from assay_schemas import (
    FileRef,
    Producer,
    Task,
)
from assay_testing.events import campaign_started, task_submitted
from assay_testing.pipeline import campaign, scripted_agent

from .conftest import CAMPAIGN, SecureNats

pytestmark = pytest.mark.timeout(60)


async def test_publisher_uploads_submits_and_hears_back_on_its_campaign_only(
    secure: SecureNats, admin_bus: Bus
) -> None:
    from assay_runner.service import build as build_runner

    base = secure.base
    await ensure_upload_bucket(admin_bus.js, upload_bucket(base, CAMPAIGN))
    await ensure_upload_bucket(admin_bus.js, upload_bucket(base, "other"))
    spec = campaign(CAMPAIGN, [scripted_agent("a1", "m", "http://127.0.0.1:9")])
    producer = Producer(service="outside", version="1")
    await admin_bus.publish(campaign_started(spec, producer=producer))
    user = publisher_user(CAMPAIGN)
    errors: list[Exception] = []

    async def on_error(e: Exception) -> None:
        errors.append(e)

    nc = await secure.connect_as(user, error_cb=on_error)
    store = LocalBlobStore(base.blob_dir)
    runner = build_runner(secure.settings("runner"), store=store)
    await runner.start()
    try:
        answers: list[dict[str, object]] = []

        async def hear(msg: nats.aio.msg.Msg) -> None:
            answers.append(json.loads(msg.data))

        for kind in ("TaskAccepted", "TaskRejected"):
            await nc.subscribe(f"{base.subject_prefix}.ev.{kind}.{CAMPAIGN}.-", cb=hear)
        js = nc.jetstream(timeout=2)
        data = b"a,b\n1,2\n"
        sha = hashlib.sha256(data).hexdigest()
        objects = await js.object_store(upload_bucket(base, CAMPAIGN))
        await objects.put(sha, data)
        # Another campaign's bucket and removing objects are refused.
        with pytest.raises(NatsTimeout):
            other = await js.object_store(upload_bucket(base, "other"))
            await other.put(sha, data)
        with pytest.raises(NatsTimeout):
            await js.purge_stream(f"OBJ_{upload_bucket(base, CAMPAIGN)}")
        missing = "0" * 64
        for task_id, ref in (
            ("t1", FileRef(path="d.csv", sha256=sha, size=len(data))),
            ("t2", FileRef(path="d.csv", sha256=missing, size=1)),
        ):
            task = Task(task_id=task_id, prompt="p", attachments=[ref])
            event = task_submitted(CAMPAIGN, task, producer=producer)
            await js.publish(
                f"{base.subject_prefix}.ev.TaskSubmitted.{CAMPAIGN}.-",
                event.model_dump_json().encode(),
                stream=base.stream,
            )
        for _ in range(100):
            if len(answers) >= 2:
                break
            await asyncio.sleep(0.1)
        by_task = {a["task_id"]: a for a in answers}
        assert by_task["t1"]["event_type"] == "TaskAccepted"
        assert by_task["t2"]["event_type"] == "TaskRejected"
        assert by_task["t2"]["reason"] == "missing_blob"
        assert store.get_bytes(sha) == data
        # No feedback of other campaigns reaches it.
        errors.clear()
        await nc.subscribe(f"{base.subject_prefix}.ev.TaskAccepted.other.-")
        await nc.flush()
        await asyncio.sleep(0.2)
        assert any("permissions violation" in str(e).lower() for e in errors)
    finally:
        await runner.stop()
        await nc.close()
    violations = secure.violations()
    assert violations and all(user in v for v in violations), violations
