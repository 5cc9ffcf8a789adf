"""Uploads from outside systems: one JetStream object store bucket per campaign.

Every NATS client (any language) can put objects, so an outside publisher needs no shared
filesystem and no S3 key: it puts each attachment under its sha256 (lowercase hex) as the
object name, then publishes its TaskSubmitted. The runner copies each uploaded blob into
the content-addressed store when it admits the task, verified against its name; the bucket
is never read again for that blob. A publisher may write only its own campaign's bucket,
so a replaced upload can only spoil its own (still verified) submissions.
"""

from __future__ import annotations

import asyncio
import hashlib

from nats.js import JetStreamContext
from nats.js.api import ObjectStoreConfig, StorageType
from nats.js.errors import BucketNotFoundError, NotFoundError, ObjectNotFoundError
from nats.js.object_store import ObjectStore

from assay.config import Settings
from assay_schemas import BlobCorrupted

from ._hashing import check_address
from ._protocol import BlobInfo, BlobStore

__all__ = [
    "ensure_upload_bucket",
    "import_upload",
    "upload_blob",
    "upload_bucket",
    "upload_bucket_name",
]


def upload_bucket(settings: Settings, campaign_id: str) -> str:
    """The object store bucket a campaign's publisher uploads attachments into."""
    return upload_bucket_name(settings.stream, campaign_id)


def upload_bucket_name(stream: str, campaign_id: str) -> str:
    """The upload bucket of a campaign on the event stream `stream` (its JetStream stream
    is `OBJ_<bucket>`; its subjects are `$O.<bucket>.C.*` and `$O.<bucket>.M.*`)."""
    return f"{stream}_UP_{campaign_id}"


async def ensure_upload_bucket(js: JetStreamContext, bucket: str) -> ObjectStore:
    """Open the bucket, creating it when missing (needs stream-create rights)."""
    try:
        return await js.object_store(bucket)
    except (BucketNotFoundError, NotFoundError):
        return await js.create_object_store(
            bucket, config=ObjectStoreConfig(storage=StorageType.FILE)
        )


async def upload_blob(js: JetStreamContext, bucket: str, data: bytes) -> BlobInfo:
    """Put bytes into an upload bucket under their sha256 (what a Python publisher calls)."""
    info = BlobInfo(hashlib.sha256(data).hexdigest(), len(data))
    store = await js.object_store(bucket)
    try:
        await store.get_info(info.sha256)
        return info  # already uploaded: objects are never replaced
    except ObjectNotFoundError:
        pass
    await store.put(info.sha256, data)
    return info


async def import_upload(
    js: JetStreamContext, bucket: str, sha256: str, store: BlobStore
) -> BlobInfo | None:
    """Copy an uploaded blob into `store`, verified against its name; None when absent.

    Raises BlobCorrupted when the uploaded bytes do not hash to the name they were put under.
    """
    check_address(sha256)
    try:
        objects = await js.object_store(bucket)
        result = await objects.get(sha256)
    except (BucketNotFoundError, NotFoundError, ObjectNotFoundError):
        return None
    data = result.data or b""
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise BlobCorrupted(f"upload {sha256} in {bucket} holds bytes that hash to {actual}")
    return await asyncio.to_thread(store.put_bytes, data)
