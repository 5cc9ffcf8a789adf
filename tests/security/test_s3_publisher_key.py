"""An outside publisher's S3 key, attacked on an S3 server that enforces IAM (moto).

The key from `assay keys s3-publisher` may put new blobs under the store's prefix and do
nothing else; bytes put under the wrong hash are refused at admission, removed, and the
right bytes can then be put and the task accepted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from minio import Minio

from assay.bus import Bus
from assay.config import Settings
from assay.embedded import find_free_port
from assay.store import (
    BLOB_PREFIX,
    PublisherKey,
    S3BlobStore,
    create_publisher_key,
    publisher_policy,
)
from assay_schemas import (
    CampaignStarted,
    StoreError,
    Task,
    TaskAccepted,
    TaskRejected,
)
from assay_testing.pipeline import campaign, scripted_agent, services, wait_for_events
from tests.runner.test_admission import OUTSIDE, answered, answers, ref, submission

pytestmark = pytest.mark.timeout(120)


@dataclass(frozen=True)
class EnforcingS3:
    """A moto server that checks every request's signature and IAM policy."""

    endpoint: str
    access_key: str
    secret_key: str

    def settings(self, bucket: str, **extra: Any) -> Settings:
        """Store settings with the operator's (administrator) key."""
        return Settings(
            store="s3",
            s3_endpoint=self.endpoint,
            s3_access_key=self.access_key,
            s3_secret_key=self.secret_key,
            s3_bucket=bucket,
            **extra,
        )

    def store(self, bucket: str) -> S3BlobStore:
        """The store as Assay's services open it, with the operator's key."""
        client = Minio(
            self.endpoint, access_key=self.access_key, secret_key=self.secret_key, secure=False
        )
        store = S3BlobStore(client, bucket)
        store.ensure_bucket()
        return store


@pytest.fixture(scope="module")
def enforcing_s3() -> Iterator[EnforcingS3]:
    """moto in its own process (its auth switch is process-wide): an administrator user is
    made while auth is off, then `reset-auth 0` turns checking on for every request."""
    port = find_free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_up(url)
        iam = _iam(url, "bootstrap", "bootstrap")
        iam.create_user(UserName="operator")
        iam.put_user_policy(
            UserName="operator",
            PolicyName="all",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
                }
            ),
        )
        key = iam.create_access_key(UserName="operator")["AccessKey"]
        request = urllib.request.Request(
            f"{url}/moto-api/reset-auth",
            data=b"0",
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        urllib.request.urlopen(request, timeout=10).close()
        yield EnforcingS3(f"127.0.0.1:{port}", key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _wait_up(url: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _iam(url: str, access_key: str, secret_key: str) -> Any:
    return boto3.client(
        "iam",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
    )


def s3_as(key: PublisherKey) -> Any:
    """A standard S3 client holding the publisher's key (what an outside system runs)."""
    return boto3.client(
        "s3",
        endpoint_url=key.endpoint_url,
        region_name=key.region,
        aws_access_key_id=key.access_key,
        aws_secret_access_key=key.secret_key,
    )


def put_new(client: Any, key: PublisherKey, sha256: str, data: bytes) -> None:
    """Put bytes as a new blob named `sha256`, the way the README tells publishers to."""
    name = f"{key.prefix}{sha256[:2]}/{sha256}"
    client.put_object(Bucket=key.bucket, Key=name, Body=data, IfNoneMatch="*")


def refused(call: Callable[[], object]) -> str:
    """The error code S3 answered a call with (the call must fail)."""
    with pytest.raises(ClientError) as caught:
        call()
    return str(caught.value.response["Error"]["Code"])


def key_from_cli(s3: EnforcingS3, bucket: str, monkeypatch: pytest.MonkeyPatch) -> PublisherKey:
    from typer.testing import CliRunner

    from assay_cli import app

    env = s3.settings(bucket)
    for name, value in {
        "ASSAY_STORE": "s3",
        "ASSAY_S3_ENDPOINT": env.s3_endpoint,
        "ASSAY_S3_ACCESS_KEY": env.s3_access_key,
        "ASSAY_S3_SECRET_KEY": env.s3_secret_key,
        "ASSAY_S3_BUCKET": bucket,
    }.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["keys", "s3-publisher", "--campaign", "c1", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body.pop("endpoint_url") == f"http://{env.s3_endpoint}"
    return PublisherKey(**body)


def test_the_publisher_key_may_only_put_new_blobs(
    enforcing_s3: EnforcingS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = f"blobs-{uuid.uuid4().hex[:8]}"
    store = enforcing_s3.store(bucket)
    enforcing_s3.store(f"other-{uuid.uuid4().hex[:8]}")
    existing = store.put_bytes(b"a sealed result: IC50 = 3.2 uM")
    key = key_from_cli(enforcing_s3, bucket, monkeypatch)
    assert (key.bucket, key.prefix) == (bucket, BLOB_PREFIX)
    s3 = s3_as(key)
    name = store.key_of(existing.sha256)

    assert refused(lambda: s3.get_object(Bucket=bucket, Key=name)) == "AccessDenied"
    assert refused(lambda: s3.head_object(Bucket=bucket, Key=name)) == "403"
    assert refused(lambda: s3.list_objects_v2(Bucket=bucket)) == "AccessDenied"
    assert refused(lambda: s3.list_objects_v2(Bucket=bucket, Prefix=BLOB_PREFIX)) == (
        "AccessDenied"
    )
    assert refused(lambda: s3.list_buckets()) == "AccessDenied"
    assert refused(lambda: s3.delete_object(Bucket=bucket, Key=name)) == "AccessDenied"
    # A batch delete answers 200 and names each key it refused.
    batch = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": name}]})
    assert not batch.get("Deleted")
    assert [(e["Key"], e["Code"]) for e in batch["Errors"]] == [(name, "AccessDenied")]
    assert refused(lambda: s3.put_object(Bucket=bucket, Key="outside/x", Body=b"x")) == (
        "AccessDenied"
    )
    assert refused(lambda: s3.put_object(Bucket=bucket, Key="sha256", Body=b"x")) == (
        "AccessDenied"
    )
    other = next(b["Name"] for b in _buckets(enforcing_s3) if b["Name"].startswith("other-"))
    assert refused(lambda: s3.put_object(Bucket=other, Key=name, Body=b"x")) == "AccessDenied"
    assert refused(lambda: s3.create_bucket(Bucket=f"mine-{uuid.uuid4().hex[:8]}")) == (
        "AccessDenied"
    )
    # A blob is never replaced (on AWS the policy also refuses a put without the header).
    assert refused(lambda: put_new(s3, key, existing.sha256, b"fake: IC50 = 0.1 uM")) == (
        "PreconditionFailed"
    )
    assert store.get_bytes(existing.sha256) == b"a sealed result: IC50 = 3.2 uM"
    # The key cannot grant itself more.
    iam = _iam(key.endpoint_url, key.access_key, key.secret_key)
    assert refused(lambda: iam.create_access_key(UserName="operator")) == "AccessDenied"
    assert refused(lambda: iam.list_users()) == "AccessDenied"

    data = b"strain,od\nA,0.5\n"
    sha256 = hashlib.sha256(data).hexdigest()
    guessed = dataclasses.replace(key, secret_key="x" * 40)
    assert refused(lambda: put_new(s3_as(guessed), key, sha256, data)) == ("SignatureDoesNotMatch")
    put_new(s3, key, sha256, data)
    assert store.get_bytes(sha256) == data


def _buckets(s3: EnforcingS3) -> list[dict[str, Any]]:
    client = boto3.client(
        "s3",
        endpoint_url=f"http://{s3.endpoint}",
        region_name="us-east-1",
        aws_access_key_id=s3.access_key,
        aws_secret_access_key=s3.secret_key,
    )
    return list(client.list_buckets()["Buckets"])


def test_the_key_carries_exactly_the_put_only_policy(enforcing_s3: EnforcingS3) -> None:
    bucket = f"blobs-{uuid.uuid4().hex[:8]}"
    key = create_publisher_key(enforcing_s3.settings(bucket), "c-policy")
    iam = _iam(f"http://{enforcing_s3.endpoint}", enforcing_s3.access_key, enforcing_s3.secret_key)
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
        await bus.publish(
            CampaignStarted(
                event_id=CampaignStarted.id_for("c1"),
                campaign_id="c1",
                campaign=spec,
                producer=OUTSIDE,
            )
        )
        ok = submission("c1", Task(task_id="t1", prompt="p", attachments=[ref(data)]))
        bad = submission("c1", Task(task_id="t2", prompt="p", attachments=[forged]))
        await bus.publish(ok)
        await bus.publish(bad)
        events = await wait_for_events(bus, answered(2))
        by_submission = {a.submission: a for a in answers(events)}
        assert isinstance(by_submission[ok.event_id], TaskAccepted)
        rejected = by_submission[bad.event_id]
        assert isinstance(rejected, TaskRejected) and rejected.reason == "blob_mismatch"
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
    iam = _iam(f"http://{enforcing_s3.endpoint}", enforcing_s3.access_key, enforcing_s3.secret_key)
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
    rejected = await Admission(bus=bus, store=store).refusal(event, spec, 1)
    assert rejected is not None and rejected.reason == "blob_mismatch"
    assert "still stored" in rejected.detail and store.exists(forged.sha256)


def test_the_command_refuses_a_local_store(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from assay_cli import app

    monkeypatch.setenv("ASSAY_STORE", "local")
    result = CliRunner().invoke(app, ["keys", "s3-publisher", "--campaign", "c1"])
    assert result.exit_code == 2 and "JetStream bucket" in result.output


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


def test_the_command_writes_the_secret_to_a_private_file_not_the_terminal(
    enforcing_s3: EnforcingS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from assay_cli import app

    # Its own campaign: IAM allows two keys per user, and the module's IAM is shared.
    bucket = f"blobs-{uuid.uuid4().hex[:8]}"
    env = enforcing_s3.settings(bucket)
    for name, value in {
        "ASSAY_HOME": str(tmp_path / "home"),
        "ASSAY_STORE": "s3",
        "ASSAY_S3_ENDPOINT": env.s3_endpoint,
        "ASSAY_S3_ACCESS_KEY": env.s3_access_key,
        "ASSAY_S3_SECRET_KEY": env.s3_secret_key,
        "ASSAY_S3_BUCKET": bucket,
    }.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["keys", "s3-publisher", "--campaign", "c-file"])
    assert result.exit_code == 0, result.output
    [path] = list((tmp_path / "home" / "keys").glob("s3-publisher-c-file-*.json"))
    assert path.stat().st_mode & 0o777 == 0o600
    assert str(path) in " ".join(result.output.split())
    body = json.loads(path.read_text())
    assert body["secret_key"] not in result.output
    body.pop("endpoint_url")
    key = PublisherKey(**body)
    put_new(s3_as(key), key, hashlib.sha256(b"x").hexdigest(), b"x")  # the file's key works
