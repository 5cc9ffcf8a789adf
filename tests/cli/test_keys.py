"""`assay keys`: a key enrolled here signs on another machine, and `assay keys s3-publisher`
issues an outside publisher's put-only S3 key (on an S3 server that enforces IAM), writes
its secret to a private file, and refuses a local store."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.config import Settings
from assay.security.signing import trust_for
from assay.store import BLOB_PREFIX, PublisherKey
from assay_cli import app
from tests.security.s3_server import (
    EnforcingS3,
    buckets_of,
    enforcing_s3,
    iam_as,
    put_new,
    refused,
    s3_as,
    use_s3,
)
from tests.security.signing import home, settings_in, signed_as, verdict_of

__all__ = ["enforcing_s3", "home"]  # fixtures, used by the tests below

pytestmark = pytest.mark.timeout(120)


def test_a_judge_on_another_machine_signs_with_a_key_enrolled_here(
    home: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`assay keys enroll judge-j9 --out DIR` where the operator seed is; DIR goes to the
    other machine's home, whose judge then signs verdicts the operator's trust list accepts."""
    monkeypatch.setenv("ASSAY_HOME", str(home.home))
    carried = tmp_path / "carried"
    result = CliRunner().invoke(app, ["keys", "enroll", "judge-j9", "--out", str(carried)])
    assert result.exit_code == 0, result.output
    elsewhere = settings_in(tmp_path, "elsewhere")
    (elsewhere.home / "keys").mkdir(parents=True)
    for path in carried.iterdir():
        (elsewhere.home / "keys" / path.name).write_bytes(path.read_bytes())
    assert not (elsewhere.home / "keys" / "operator.seed").exists()
    trust = trust_for(home)
    assert trust is not None
    event = verdict_of("j9")
    assert trust.verify(*signed_as(elsewhere, "judge-j9", event), event).ok


def key_from_cli(s3: EnforcingS3, bucket: str, monkeypatch: pytest.MonkeyPatch) -> PublisherKey:
    use_s3(monkeypatch, s3, bucket)
    result = CliRunner().invoke(app, ["keys", "s3-publisher", "--campaign", "c1", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body.pop("endpoint_url") == f"http://{s3.settings(bucket).s3_endpoint}"
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
    other = next(b["Name"] for b in buckets_of(enforcing_s3) if b["Name"].startswith("other-"))
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
    iam = iam_as(key.endpoint_url, key.access_key, key.secret_key)
    assert refused(lambda: iam.create_access_key(UserName="operator")) == "AccessDenied"
    assert refused(lambda: iam.list_users()) == "AccessDenied"

    data = b"strain,od\nA,0.5\n"
    sha256 = hashlib.sha256(data).hexdigest()
    guessed = dataclasses.replace(key, secret_key="x" * 40)
    assert refused(lambda: put_new(s3_as(guessed), key, sha256, data)) == ("SignatureDoesNotMatch")
    put_new(s3, key, sha256, data)
    assert store.get_bytes(sha256) == data


def test_the_command_refuses_a_local_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_STORE", "local")
    result = CliRunner().invoke(app, ["keys", "s3-publisher", "--campaign", "c1"])
    assert result.exit_code == 2 and "JetStream bucket" in result.output


def test_the_command_writes_the_secret_to_a_private_file_not_the_terminal(
    enforcing_s3: EnforcingS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Its own campaign: IAM allows two keys per user, and the module's IAM is shared.
    bucket = f"blobs-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("ASSAY_HOME", str(tmp_path / "home"))
    use_s3(monkeypatch, enforcing_s3, bucket)
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
