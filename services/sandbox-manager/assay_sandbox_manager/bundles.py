"""Program bundles on the host: a stored bundle unpacked once into the sandbox cache, then
bound read-only at /opt/agent in every sandbox of a run that names it (see assay.bundle)."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from assay.bundle import BundleRefused, check_members
from assay.store import BlobStore

from .runtime import cache_entry, sandbox_cache

__all__ = ["bundle_folder", "ensure_bundle"]

_COMPLETE = ".assay-bundle-complete"


def bundle_folder(sha256: str) -> Path:
    """Where the bundle's tree is (under its cache entry); complete only after ensure_bundle."""
    return sandbox_cache() / f"bundle-{sha256}" / "agent"


def is_unpacked(sha256: str) -> bool:
    """Whether ensure_bundle finished for this bundle."""
    return (bundle_folder(sha256).parent / _COMPLETE).is_file()


def ensure_bundle(store: BlobStore, sha256: str) -> Path:
    """The bundle's tree, unpacked from the store unless cached; checked again on the way."""
    if not is_unpacked(sha256):
        entry = bundle_folder(sha256).parent
        cache_entry(
            entry, _COMPLETE, lambda staging: _unpack(store.get_bytes(sha256), sha256, staging)
        )
    return bundle_folder(sha256)


def _unpack(data: bytes, sha256: str, staging: Path) -> str:
    if hashlib.sha256(data).hexdigest() != sha256:
        raise BundleRefused(f"bundle {sha256}: the stored bytes do not hash to it")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        check_members(sha256, tar.getmembers())
        # The data filter refuses what check_members does, and more: two locks.
        tar.extractall(staging / "agent", filter="data")
    return sha256 + "\n"
