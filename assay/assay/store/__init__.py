"""Content-addressed blob store: a local directory or S3/MinIO behind one Protocol."""

from __future__ import annotations

from minio import Minio

from assay.config import Settings

from ._hashing import hash_file
from ._local import LocalBlobStore
from ._manifest import media_type_of, store_file
from ._protocol import BlobInfo, BlobStore
from ._s3 import S3BlobStore

__all__ = [
    "BlobInfo",
    "BlobStore",
    "LocalBlobStore",
    "S3BlobStore",
    "hash_file",
    "media_type_of",
    "open_store",
    "store_file",
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
