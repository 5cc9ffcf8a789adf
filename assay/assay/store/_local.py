"""Blob store in a local directory: the embedded default."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from assay_schemas import BlobNotFound, StoreError

from ._hashing import CHUNK, VerifiedReads, check_address
from ._protocol import BlobInfo

__all__ = ["LocalBlobStore"]


class LocalBlobStore(VerifiedReads):
    """Blobs as read-only files under `root/ab/cd/<sha256>`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    def path_of(self, sha256: str) -> Path:
        """Where a blob lives on disk (for audits and tests)."""
        check_address(sha256)
        return self.root / sha256[:2] / sha256[2:4] / sha256

    def _publish(self, tmp: Path, info: BlobInfo) -> BlobInfo:
        final = self.path_of(info.sha256)
        if final.exists():
            tmp.unlink()
            return info
        final.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(tmp, 0o444)
        os.replace(tmp, final)  # atomic: readers never see a partial blob
        return info

    def _tempfile(self) -> tuple[int, Path]:
        fd, name = tempfile.mkstemp(dir=self.root, prefix=".incoming-")
        return fd, Path(name)

    def put_file(self, path: Path) -> BlobInfo:
        """Copy a file in while hashing it, in one streaming pass."""
        fd, tmp = self._tempfile()
        digest = hashlib.sha256()
        size = 0
        try:
            with path.open("rb") as src, os.fdopen(fd, "wb") as dst:
                while chunk := src.read(CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
                    dst.write(chunk)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise StoreError(f"cannot store {path}: {e}") from e
        return self._publish(tmp, BlobInfo(digest.hexdigest(), size))

    def put_bytes(self, data: bytes) -> BlobInfo:
        """Store bytes."""
        info = BlobInfo(hashlib.sha256(data).hexdigest(), len(data))
        if self.path_of(info.sha256).exists():
            return info
        fd, tmp = self._tempfile()
        with os.fdopen(fd, "wb") as dst:
            dst.write(data)
        return self._publish(tmp, info)

    def _chunks(self, sha256: str) -> Iterator[bytes]:
        path = self.path_of(sha256)
        try:
            fh = path.open("rb")
        except FileNotFoundError as e:
            raise BlobNotFound(f"blob {sha256} not found in {self.root}") from e
        with fh:
            while chunk := fh.read(CHUNK):
                yield chunk

    def exists(self, sha256: str) -> bool:
        """Whether the blob is present."""
        return self.path_of(sha256).exists()

    def _remove(self, sha256: str) -> None:
        try:
            self.path_of(sha256).unlink(missing_ok=True)
        except OSError as e:
            raise StoreError(f"cannot remove blob {sha256} from {self.root}: {e}") from e
