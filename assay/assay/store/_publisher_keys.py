"""Least-privilege S3 keys for outside publishers: they may write new blobs, nothing else.

An outside system that puts attachments straight into the S3 store gets a key whose only
right is `s3:PutObject` on `<bucket>/sha256/*`: it cannot read, list or delete anything,
nor write another prefix or bucket. On AWS the key may only create objects (every put
must carry `If-None-Match: *`), so it cannot replace a blob either. Bytes put under the
wrong hash cannot do harm: every read verifies a blob against its name, and the runner
refuses such a task at admission.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

from assay.config import Settings
from assay_schemas import StoreError

from ._s3 import BLOB_PREFIX

__all__ = ["PublisherKey", "create_publisher_key", "publisher_policy", "publisher_user"]

POLICY_NAME = "assay-publish-blobs"


@dataclass(frozen=True)
class PublisherKey:
    """What an outside system needs to upload blobs (and nothing more)."""

    user: str
    access_key: str
    secret_key: str
    endpoint: str
    secure: bool
    region: str
    bucket: str
    prefix: str

    @property
    def endpoint_url(self) -> str:
        """The endpoint as the AWS SDKs take it."""
        return f"{'https' if self.secure else 'http'}://{self.endpoint}"


def publisher_user(campaign_id: str) -> str:
    """The IAM user of a campaign's publisher (IAM allows 64 characters)."""
    name = f"assay-publisher-{campaign_id}"
    if len(name) <= 64:
        return name
    return f"{name[:55]}-{hashlib.sha256(campaign_id.encode()).hexdigest()[:8]}"


def publisher_policy(bucket: str, *, new_only: bool = True) -> dict[str, Any]:
    """The key's only right: put objects under the blob prefix of `bucket`.

    With `new_only` (AWS), an object may only be created, never replaced: a plain put and
    a multipart completion must carry `If-None-Match: *`; the steps of a multipart upload
    that create no object are exempt (AWS's documented pattern for conditional writes).
    """
    blobs = f"arn:aws:s3:::{bucket}/{BLOB_PREFIX}*"
    if not new_only:
        return _policy({"Sid": "PutBlobs", "Action": "s3:PutObject", "Resource": blobs})
    return _policy(
        {
            "Sid": "CreateBlobsOnly",
            "Action": "s3:PutObject",
            "Resource": blobs,
            "Condition": {"Null": {"s3:if-none-match": "false"}},
        },
        {
            "Sid": "MultipartParts",
            "Action": "s3:PutObject",
            "Resource": blobs,
            "Condition": {"Bool": {"s3:ObjectCreationOperation": "false"}},
        },
    )


def _policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", **s} for s in statements],
    }


def create_publisher_key(settings: Settings, campaign_id: str) -> PublisherKey:
    """Create (on the configured S3 endpoint) a put-only key for a campaign's publisher.

    Needs the operator's S3 key in the settings; each call issues a fresh key.
    """
    user = publisher_user(campaign_id)
    if settings.s3_admin == "minio":
        access_key, secret_key = _minio_key(settings, user)
    else:
        access_key, secret_key = _iam_key(settings, user, campaign_id)
    return PublisherKey(
        user=user,
        access_key=access_key,
        secret_key=secret_key,
        endpoint=settings.s3_endpoint,
        secure=settings.s3_secure,
        region=settings.s3_region,
        bucket=settings.s3_bucket,
        prefix=BLOB_PREFIX,
    )


def _iam_endpoint(settings: Settings) -> str | None:
    """AWS's own IAM for an AWS S3 endpoint; otherwise the S3 endpoint serves IAM too (moto)."""
    if settings.s3_iam_endpoint:
        return settings.s3_iam_endpoint
    if settings.s3_endpoint.endswith("amazonaws.com"):
        return None
    return f"{'https' if settings.s3_secure else 'http'}://{settings.s3_endpoint}"


def _iam_key(settings: Settings, user: str, campaign_id: str) -> tuple[str, str]:
    """IAM user with the put-only inline policy, and a new access key of it."""
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError as e:
        raise StoreError("S3 publisher keys need boto3: pip install 'assay[aws]'") from e
    iam = boto3.client(
        "iam",
        endpoint_url=_iam_endpoint(settings),
        region_name=settings.s3_region,
        aws_access_key_id=settings.s3_access_key,
        aws_secret_access_key=settings.s3_secret_key,
    )
    try:
        # A publisher asking again gets a second key on the same user (IAM allows two).
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_user(UserName=user, Tags=[{"Key": "assay-campaign", "Value": campaign_id}])
        iam.put_user_policy(
            UserName=user,
            PolicyName=POLICY_NAME,
            PolicyDocument=json.dumps(publisher_policy(settings.s3_bucket)),
        )
        key = iam.create_access_key(UserName=user)["AccessKey"]
    except iam.exceptions.LimitExceededException as e:
        raise StoreError(
            f"IAM user {user} already has two access keys (IAM's limit): delete one first "
            f"(aws iam list-access-keys / delete-access-key --user-name {user})"
        ) from e
    except (BotoCoreError, ClientError) as e:
        raise StoreError(f"cannot create IAM publisher key {user}: {e}") from e
    return str(key["AccessKeyId"]), str(key["SecretAccessKey"])


def _minio_key(settings: Settings, user: str) -> tuple[str, str]:
    """MinIO user with the put-only policy (MinIO's admin API; replacing is not refused)."""
    from minio import MinioAdmin
    from minio.credentials.providers import StaticProvider
    from minio.error import MinioAdminException
    from urllib3.exceptions import HTTPError

    admin = MinioAdmin(
        endpoint=settings.s3_endpoint,
        credentials=StaticProvider(settings.s3_access_key, settings.s3_secret_key),
        region=settings.s3_region,
        secure=settings.s3_secure,
    )
    access_key = f"assaypub{secrets.token_hex(6)}"
    secret_key = secrets.token_urlsafe(30)
    try:
        admin.policy_add(user, policy=publisher_policy(settings.s3_bucket, new_only=False))
        admin.user_add(access_key, secret_key)
        admin.attach_policy([user], user=access_key)
    except (MinioAdminException, HTTPError, OSError, ValueError) as e:
        raise StoreError(f"cannot create MinIO publisher key for {user}: {e}") from e
    return access_key, secret_key
