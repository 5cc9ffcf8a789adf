"""An S3 server that enforces IAM (moto in its own process), and the S3 calls an outside
publisher makes with its key: shared by the publisher-key tests and the CLI's `assay keys`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from minio import Minio

from assay.config import Settings
from assay.embedded import find_free_port
from assay.store import PublisherKey, S3BlobStore


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
        iam = iam_as(url, "bootstrap", "bootstrap")
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


def iam_as(url: str, access_key: str, secret_key: str) -> Any:
    """An IAM client of the server at `url`, holding the given key."""
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


def buckets_of(s3: EnforcingS3) -> list[dict[str, Any]]:
    """Every bucket of the server, listed with the operator's key."""
    client = boto3.client(
        "s3",
        endpoint_url=f"http://{s3.endpoint}",
        region_name="us-east-1",
        aws_access_key_id=s3.access_key,
        aws_secret_access_key=s3.secret_key,
    )
    return list(client.list_buckets()["Buckets"])


def use_s3(monkeypatch: pytest.MonkeyPatch, s3: EnforcingS3, bucket: str) -> None:
    """The environment of an operator whose store is `bucket` on `s3` (as the CLI reads it)."""
    env = s3.settings(bucket)
    for name, value in {
        "ASSAY_STORE": "s3",
        "ASSAY_S3_ENDPOINT": env.s3_endpoint,
        "ASSAY_S3_ACCESS_KEY": env.s3_access_key,
        "ASSAY_S3_SECRET_KEY": env.s3_secret_key,
        "ASSAY_S3_BUCKET": bucket,
    }.items():
        monkeypatch.setenv(name, value)
