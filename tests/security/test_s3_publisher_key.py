"""An outside publisher's S3 key, attacked on an S3 server that enforces IAM (moto).

The key (`assay keys s3-publisher` issues it; tests/cli/test_keys.py attacks the key the
command prints) carries a put-only policy; bytes put under the wrong hash are refused at
admission, removed, and the right bytes can then be put and the task accepted.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import pytest
from minio import Minio

from assay.bus import Bus
from assay.config import Settings
from assay.store import (
    BLOB_PREFIX,
    S3BlobStore,
    create_publisher_key,
    publisher_policy,
)
from assay_schemas import (
    StoreError,
    Task,
    TaskAccepted,
)
from assay_testing.events import campaign_started
from assay_testing.pipeline import campaign, scripted_agent, services, wait_for_events
from tests.runner.test_admission import (
    OUTSIDE,
    answered,
    answers,
    ref,
    right_and_forged,
    submission,
)
from tests.security.s3_server import EnforcingS3, enforcing_s3, iam_as, put_new, s3_as

__all__ = ["enforcing_s3"]  # the fixture, used by the tests below

pytestmark = pytest.mark.timeout(120)


def test_the_key_carries_exactly_the_put_only_policy(enforcing_s3: EnforcingS3) -> None:
    bucket = f"blobs-{uuid.uuid4().hex[:8]}"
    key = create_publisher_key(enforcing_s3.settings(bucket), "c-policy")
    iam = iam_as(
        f"http://{enforcing_s3.endpoint}", enforcing_s3.access_key, enforcing_s3.secret_key
    )
    assert iam.list_user_policies(UserName=key.user)["PolicyNames"] == ["assay-publish-blobs"]
    assert iam.list_attached_user_policies(UserName=key.user)["AttachedPolicies"] == []
    document = iam.get_user_policy(UserName=key.user, PolicyName="assay-publish-blobs")
    policy = document["PolicyDocument"]
    policy = json.loads(policy) if isinstance(policy, str) else policy
    assert policy == publisher_policy(bucket)
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow" and statement["Action"] == "s3:PutObject"
        assert statement["Resource"] == f"arn:aws:s3:::{bucket}/{BLOB_PREFIX}*"
    # AWS evaluates these (moto does not): an object is created only by a put that carries
    # If-None-Match; only the multipart steps that create no object are exempt.
    assert [s["Condition"] for s in policy["Statement"]] == [
        {"Null": {"s3:if-none-match": "false"}},
        {"Bool": {"s3:ObjectCreationOperation": "false"}},
    ]
    # Asking again issues a second key of the same user; both work.
    again = create_publisher_key(enforcing_s3.settings(bucket), "c-policy")
    assert again.user == key.user and again.access_key != key.access_key
    with pytest.raises(StoreError, match="already has two access keys"):
        create_publisher_key(enforcing_s3.settings(bucket), "c-policy")


async def test_wrong_bytes_are_refused_at_admission_and_the_right_ones_then_accepted(
    enforcing_s3: EnforcingS3, bus: Bus, settings: Settings
) -> None:
    bucket = f"blobs-{uuid.uuid4().hex[:8]}"
    store = enforcing_s3.store(bucket)
    key = create_publisher_key(enforcing_s3.settings(bucket), "c1")
    s3 = s3_as(key)
    data = b"strain,od\nA,0.5\n"
    put_new(s3, key, ref(data).sha256, data)
    promised = b"what the name promises"
    forged = ref(promised)
    put_new(s3, key, forged.sha256, b"other bytes")
    spec = campaign("c1", [scripted_agent("a1", "m", "http://127.0.0.1:9")], epochs=2)
    async with services(settings, store, names=("runner",)):
        await bus.publish(campaign_started(spec, producer=OUTSIDE))
        rejected = await right_and_forged(bus, data, forged)
        actual = hashlib.sha256(b"other bytes").hexdigest()
        assert forged.sha256 in rejected.detail and f"hash to {actual}" in rejected.detail
        assert "upload the right ones again" in rejected.detail
        assert store.get_bytes(ref(data).sha256) == data
        assert not store.exists(forged.sha256), "the wrong bytes must be removed"

        put_new(s3, key, forged.sha256, promised)
        again = submission("c1", Task(task_id="t2", prompt="p", attachments=[forged]), "2")
        await bus.publish(again)
        events = await wait_for_events(bus, answered(3))
    answer = {a.submission: a for a in answers(events)}[again.event_id]
    assert isinstance(answer, TaskAccepted), answer
    assert store.get_bytes(forged.sha256) == promised


async def test_a_runner_that_may_not_delete_still_refuses_wrong_bytes(
    enforcing_s3: EnforcingS3, bus: Bus
) -> None:
    """A hardened runner key without s3:DeleteObject: the task is refused all the same,
    and the answer says the wrong bytes stay until the operator removes them."""
    from assay_runner.admission import Admission

    bucket = f"blobs-{uuid.uuid4().hex[:8]}"
    enforcing_s3.store(bucket)
    iam = iam_as(
        f"http://{enforcing_s3.endpoint}", enforcing_s3.access_key, enforcing_s3.secret_key
    )
    iam.create_user(UserName=f"runner-{bucket}")
    rights = ["s3:GetObject", "s3:PutObject", "s3:ListBucket"]
    resources = [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]
    iam.put_user_policy(
        UserName=f"runner-{bucket}",
        PolicyName="runner",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": rights, "Resource": resources}],
            }
        ),
    )
    runner_key = iam.create_access_key(UserName=f"runner-{bucket}")["AccessKey"]
    client = Minio(
        enforcing_s3.endpoint,
        access_key=runner_key["AccessKeyId"],
        secret_key=runner_key["SecretAccessKey"],
        secure=False,
        region="us-east-1",  # as open_store gives it: no GetBucketLocation needed
    )
    store = S3BlobStore(client, bucket)
    key = create_publisher_key(enforcing_s3.settings(bucket), "c-hardened")
    forged = ref(b"what the name promises")
    put_new(s3_as(key), key, forged.sha256, b"other bytes")
    spec = campaign("c1", [scripted_agent("a1", "m", "http://127.0.0.1:9")])
    event = submission("c1", Task(task_id="t1", prompt="p", attachments=[forged]))
    rejected = await Admission(bus=bus, store=store).rejection(event, spec, 1)
    assert rejected is not None and rejected.reason == "blob_mismatch"
    assert "still stored" in rejected.detail and store.exists(forged.sha256)


def test_a_minio_key_gets_the_put_only_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """MinIO's admin calls, recorded (no MinIO server runs here: this checks only what
    Assay asks of MinIO, not that MinIO enforces it)."""
    import minio

    calls: list[tuple[str, Any]] = []

    class Recorder:
        def __init__(self, **kwargs: Any) -> None:
            calls.append(("connect", kwargs["endpoint"]))

        def policy_add(self, name: str, policy: dict[str, Any]) -> None:
            calls.append(("policy_add", (name, policy)))

        def user_add(self, access_key: str, secret_key: str) -> None:
            calls.append(("user_add", (access_key, len(secret_key))))

        def attach_policy(self, policies: list[str], user: str) -> None:
            calls.append(("attach_policy", (policies, user)))

    monkeypatch.setattr(minio, "MinioAdmin", Recorder)
    settings = Settings(store="s3", s3_admin="minio", s3_endpoint="minio:9000", s3_bucket="b")
    key = create_publisher_key(settings, "c1")
    assert calls == [
        ("connect", "minio:9000"),
        ("policy_add", ("assay-publisher-c1", publisher_policy("b", new_only=False))),
        ("user_add", (key.access_key, len(key.secret_key))),
        ("attach_policy", (["assay-publisher-c1"], key.access_key)),
    ]
    [statement] = publisher_policy("b", new_only=False)["Statement"]
    assert statement == {
        "Effect": "Allow",
        "Sid": "PutBlobs",
        "Action": "s3:PutObject",
        "Resource": "arn:aws:s3:::b/sha256/*",
    }
    assert len(key.secret_key) >= 32
