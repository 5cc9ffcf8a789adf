"""Streaming sha256 helpers shared by the store backends."""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from pathlib import Path

from assay_schemas import BlobCorrupted, BlobNotFound, StoreError

from ._protocol import BlobInfo

CHUNK = 1 << 20
_SHA = re.compile(r"^[0-9a-f]{64}$")


def hash_file(path: Path) -> BlobInfo:
    """sha256 and size of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return BlobInfo(digest.hexdigest(), size)


def check_address(sha256: str) -> str:
    """Reject anything that is not a lowercase hex sha256 (it becomes a path or key)."""
    if not _SHA.match(sha256):
        raise StoreError(f"not a sha256 blob address: {sha256!r}")
    return sha256


def verify_chunks(sha256: str, chunks: Iterable[bytes], sink: list[bytes] | None = None) -> int:
    """Hash a stream of chunks; raise BlobCorrupted if it is not `sha256`."""
    digest = hashlib.sha256()
    size = 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
        if sink is not None:
            sink.append(chunk)
    actual = digest.hexdigest()
    if actual != sha256:
        raise BlobCorrupted(f"blob {sha256} is corrupted: stored bytes hash to {actual}")
    return size


def verify_into(sha256: str, chunks: Iterable[bytes], dest: Path) -> None:
    """Stream chunks into `dest` while hashing; `dest` is removed if they are not `sha256`."""

    def tee() -> Iterable[bytes]:
        with dest.open("wb") as out:
            for chunk in chunks:
                out.write(chunk)
                yield chunk

    try:
        verify_chunks(sha256, tee())
    except BaseException:
        dest.unlink(missing_ok=True)
        raise


class VerifiedReads(ABC):
    """Reads for a store that streams a blob's chunks: every byte verified against its name."""

    @abstractmethod
    def _chunks(self, sha256: str) -> Iterator[bytes]:
        """The stored bytes of a blob, in chunks (raise BlobNotFound when absent)."""

    @abstractmethod
    def _remove(self, sha256: str) -> None:
        """Delete a blob's stored bytes."""

    def get_bytes(self, sha256: str) -> bytes:
        """Read and verify a blob."""
        parts: list[bytes] = []
        verify_chunks(sha256, self._chunks(sha256), parts)
        return b"".join(parts)

    def get_file(self, sha256: str, dest: Path) -> None:
        """Copy a blob out into a file, verified while streaming."""
        verify_into(sha256, self._chunks(sha256), dest)

    def discard_corrupted(self, sha256: str) -> bool:
        """Remove a blob whose stored bytes do not hash to its name, so that the right bytes
        can be put again (a publisher's key may only create blobs); True when removed."""
        try:
            verify_chunks(sha256, self._chunks(sha256))
        except BlobNotFound:
            return False
        except BlobCorrupted:
            self._remove(sha256)
            return True
        return False  # sound: never removed
