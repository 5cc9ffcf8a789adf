"""The blob store interface: content addressed by sha256."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = ["BlobInfo", "BlobStore"]


class BlobInfo(NamedTuple):
    """Address and size of a stored blob."""

    sha256: str
    size: int


@runtime_checkable
class BlobStore(Protocol):
    """Immutable blobs by sha256. Puts are idempotent; gets verify the hash."""

    def put_file(self, path: Path) -> BlobInfo:
        """Store a file's bytes, streaming; return its address."""
        ...

    def put_bytes(self, data: bytes) -> BlobInfo:
        """Store bytes; return their address."""
        ...

    def get_bytes(self, sha256: str) -> bytes:
        """Return the bytes of a blob, verified against its address."""
        ...

    def get_file(self, sha256: str, dest: Path) -> None:
        """Stream a blob into `dest`, verified; `dest` is removed if verification fails."""
        ...

    def exists(self, sha256: str) -> bool:
        """Whether a blob with this address is stored."""
        ...

    def discard_corrupted(self, sha256: str) -> bool:
        """Remove a blob whose bytes do not hash to its address; True when removed."""
        ...
