"""Blob store on S3 / MinIO through the `minio` SDK: the production backend."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path

from minio import Minio
from minio.error import MinioException, S3Error
from urllib3.exceptions import HTTPError

from assay_schemas import BlobNotFound, StoreError

from ._hashing import CHUNK, VerifiedReads, check_address, hash_file
from ._protocol import BlobInfo

__all__ = ["BLOB_PREFIX", "S3BlobStore"]

BLOB_PREFIX = "sha256/"
"""Every blob's key starts here (the one prefix an outside publisher's key may write)."""

_TRANSPORT_ERRORS = (MinioException, HTTPError, OSError)


class S3BlobStore(VerifiedReads):
    """Blobs as objects `sha256/ab/<sha256>` in one bucket."""

    def __init__(self, client: Minio, bucket: str) -> None:
        self.client = client
        self.bucket = bucket

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist."""
        try:
            if not self.client.bucket_exists(self.bucket):
                self.client.make_bucket(self.bucket)
        except _TRANSPORT_ERRORS as e:
            raise StoreError(f"S3 bucket {self.bucket}: {e}") from e

    def key_of(self, sha256: str) -> str:
        """Object key of a blob."""
        check_address(sha256)
        return f"{BLOB_PREFIX}{sha256[:2]}/{sha256}"

    def exists(self, sha256: str) -> bool:
        """Whether the object is present."""
        try:
            self.client.stat_object(self.bucket, self.key_of(sha256))
            return True
        except S3Error as e:
            if e.code in {"NoSuchKey", "NoSuchObject", "ResourceNotFound"}:
                return False
            raise StoreError(f"S3 stat of blob {sha256}: {e}") from e
        except _TRANSPORT_ERRORS as e:
            raise StoreError(f"S3 stat of blob {sha256}: {e}") from e

    def put_file(self, path: Path) -> BlobInfo:
        """Hash the file in one pass, then upload it streaming (skipped if present)."""
        info = hash_file(path)
        if self.exists(info.sha256):
            return info
        try:
            self.client.fput_object(self.bucket, self.key_of(info.sha256), str(path))
        except _TRANSPORT_ERRORS as e:
            raise StoreError(f"S3 upload of {path} as blob {info.sha256}: {e}") from e
        return info

    def put_bytes(self, data: bytes) -> BlobInfo:
        """Upload bytes (skipped if present)."""
        info = BlobInfo(hashlib.sha256(data).hexdigest(), len(data))
        if self.exists(info.sha256):
            return info
        try:
            self.client.put_object(
                self.bucket, self.key_of(info.sha256), io.BytesIO(data), len(data)
            )
        except _TRANSPORT_ERRORS as e:
            raise StoreError(f"S3 upload of blob {info.sha256}: {e}") from e
        return info

    def _remove(self, sha256: str) -> None:
        try:
            self.client.remove_object(self.bucket, self.key_of(sha256))
        except _TRANSPORT_ERRORS as e:
            raise StoreError(f"S3 removal of blob {sha256}: {e}") from e

    def _chunks(self, sha256: str) -> Iterator[bytes]:
        try:
            response = self.client.get_object(self.bucket, self.key_of(sha256))
        except S3Error as e:
            if e.code in {"NoSuchKey", "NoSuchObject"}:
                raise BlobNotFound(f"blob {sha256} not found in s3://{self.bucket}") from e
            raise StoreError(f"S3 read of blob {sha256}: {e}") from e
        except _TRANSPORT_ERRORS as e:
            raise StoreError(f"S3 read of blob {sha256}: {e}") from e
        try:
            yield from response.stream(CHUNK)
        except _TRANSPORT_ERRORS as e:
            raise StoreError(f"S3 read of blob {sha256}: {e}") from e
        finally:
            response.close()
            response.release_conn()
