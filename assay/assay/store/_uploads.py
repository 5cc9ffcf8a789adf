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
import re
from contextlib import aclosing

from nats.js import JetStreamContext
from nats.js.api import ObjectStoreConfig, StorageType
from nats.js.errors import (
    BadObjectMetaError,
    BucketNotFoundError,
    NotFoundError,
    ObjectNotFoundError,
)
from nats.js.object_store import ObjectStore

from assay.buckets import upload_bucket_name
from assay.config import UPLOAD_BUCKET_MAX_BYTES, Settings
from assay_schemas import BlobCorrupted, UploadRefused

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


async def ensure_upload_bucket(
    js: JetStreamContext, bucket: str, *, max_bytes: int = UPLOAD_BUCKET_MAX_BYTES
) -> ObjectStore:
    """Open the bucket, creating it when missing (needs stream-create rights), holding at
    most `max_bytes` (0: no limit; past it a put is refused, nothing is dropped)."""
    try:
        return await js.object_store(bucket)
    except (BucketNotFoundError, NotFoundError):
        return await js.create_object_store(
            bucket, config=ObjectStoreConfig(storage=StorageType.FILE, max_bytes=max_bytes)
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
    js: JetStreamContext, bucket: str, sha256: str, store: BlobStore, *, size: int
) -> BlobInfo | None:
    """Copy an uploaded blob into `store`, verified against its name; None when absent.

    The bucket is its publisher's to write, metadata included, so nothing in it is taken
    on trust: links are not followed (they may point into another campaign's bucket),
    no more than the `size` bytes the task declares are read, and the chunks are read
    from the one subject the metadata names. Raises UploadRefused for such an upload and
    BlobCorrupted when the bytes do not hash to the name they were put under.
    """
    check_address(sha256)
    where = f"upload {sha256} in {bucket}"
    try:
        objects = await js.object_store(bucket)
        info = await objects.get_info(sha256)
    except (BucketNotFoundError, NotFoundError, ObjectNotFoundError):
        return None
    except BadObjectMetaError as e:
        raise UploadRefused(f"{where}: its metadata is not an object's") from e
    if info.is_link():
        raise UploadRefused(f"{where}: is a link; links are not followed")
    if (info.size or 0) > size:
        raise UploadRefused(f"{where}: {info.size} bytes, the task declares {size}")
    if not _NUID.fullmatch(info.nuid or ""):
        raise UploadRefused(f"{where}: its metadata names no chunk subject (nuid {info.nuid!r})")
    data = await _chunks(js, bucket, info.nuid, size, where)
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise BlobCorrupted(f"{where} holds bytes that hash to {actual}")
    return await asyncio.to_thread(store.put_bytes, data)


_NUID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What nats-py names an object's chunks by: one subject token, no wildcard."""


async def _chunks(js: JetStreamContext, bucket: str, nuid: str, size: int, where: str) -> bytes:
    """An object's chunks, stopping at the first byte past `size`."""
    from assay.bus import read_raw  # the bus's ordered reader; the store stays light to import

    data = bytearray()
    # A NATS error here is an outage (the bus retries the admission), not the upload's fault.
    # Closed on the refusal too: an open reader keeps its consumer until the loop ends.
    async with aclosing(read_raw(js, f"OBJ_{bucket}", subject=f"$O.{bucket}.C.{nuid}")) as raws:
        async for raw in raws:
            data += raw.data
            if len(data) > size:
                raise UploadRefused(f"{where}: more bytes than the {size} the task declares")
    return bytes(data)
