"""Program bundles on the host: a stored bundle unpacked once into the sandbox cache, then
bound read-only at /opt/agent in every sandbox of a run that names it (see assay.bundle)."""

from __future__ import annotations

import fcntl
import hashlib
import io
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from assay.bundle import BundleRefused, check_members
from assay.store import BlobStore

from .runtime import sandbox_cache

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
    entry = bundle_folder(sha256).parent
    if is_unpacked(sha256):
        return bundle_folder(sha256)
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{entry}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another service may be unpacking it too
        if not is_unpacked(sha256):
            _unpack(store.get_bytes(sha256), sha256, entry)
    return bundle_folder(sha256)


def _unpack(data: bytes, sha256: str, entry: Path) -> None:
    if hashlib.sha256(data).hexdigest() != sha256:
        raise BundleRefused(f"bundle {sha256}: the stored bytes do not hash to it")
    staging = Path(tempfile.mkdtemp(prefix=f"{entry.name}.", dir=entry.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            check_members(sha256, tar.getmembers())
            # The data filter refuses what check_members does, and more: two locks.
            tar.extractall(staging / "agent", filter="data")
        (staging / _COMPLETE).write_text(sha256 + "\n")
        # Sandboxes run as other uids: they read and traverse, never write.
        subprocess.run(["chmod", "-R", "a+rX,go-w", str(staging)], check=True)
        shutil.rmtree(entry, ignore_errors=True)  # a half-made one of a crashed service
        staging.rename(entry)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
