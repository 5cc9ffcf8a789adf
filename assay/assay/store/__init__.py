"""Content-addressed blob store: a local directory or S3/MinIO behind one Protocol."""

from __future__ import annotations

from minio import Minio

from assay.config import Settings

from ._hashing import hash_file
from ._local import LocalBlobStore
from ._manifest import media_type_of, store_file
from ._protocol import BlobInfo, BlobStore
from ._publisher_keys import PublisherKey, create_publisher_key, publisher_policy
from ._s3 import BLOB_PREFIX, S3BlobStore
from ._uploads import (
    ensure_upload_bucket,
    import_upload,
    upload_blob,
    upload_bucket,
    upload_bucket_name,
)

__all__ = [
    "BLOB_PREFIX",
    "BlobInfo",
    "BlobStore",
    "LocalBlobStore",
    "PublisherKey",
    "S3BlobStore",
    "create_publisher_key",
    "ensure_upload_bucket",
    "hash_file",
    "import_upload",
    "media_type_of",
    "open_store",
    "publisher_policy",
    "store_file",
    "upload_blob",
    "upload_bucket",
    "upload_bucket_name",
]


def open_store(settings: Settings) -> BlobStore:
    """The blob store the settings name."""
    if settings.store == "s3":
        client = Minio(
            settings.s3_endpoint,
            access_key=settings.s3_access_key,
            secret_key=settings.s3_secret_key,
            secure=settings.s3_secure,
            region=settings.s3_region,
        )
        s3 = S3BlobStore(client, settings.s3_bucket)
        s3.ensure_bucket()
        return s3
    return LocalBlobStore(settings.blob_dir)
