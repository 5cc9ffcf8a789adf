"""Per-sandbox writable filesystem of a fixed size: a tmpfs mounted with ``size=``.

A tmpfs mount is one syscall (sub-millisecond), so create stays far under the 50 ms
target, and a full disk is ENOSPC inside that sandbox only. Without CAP_SYS_ADMIN the
directory stays a plain one and only RLIMIT_FSIZE bounds single files.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

__all__ = ["libc", "mount_quota", "mount_root_fs", "unmount_quota", "unmount_root_fs"]

libc = _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2


def mount_quota(target: Path, size_mb: int, uid: int, gid: int) -> bool:
    """Mount a tmpfs of size_mb on target (owned by uid:gid, mode 0700); False if not root."""
    target.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    # nr_inodes bounds a million-empty-files fill, which size= alone would not.
    opts = f"size={size_mb}m,nr_inodes={max(4096, size_mb * 64)},uid={uid},gid={gid},mode=0700"
    rc = _libc.mount(b"tmpfs", os.fsencode(target), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts.encode())
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount tmpfs on {target}: {os.strerror(err)}")
    return True


def unmount_quota(target: Path) -> None:
    """Lazily unmount target if it is a mount point (idempotent, also when two teardowns of
    one sandbox overlap: the second's EINVAL, "not a mount point" by the time it asked, is
    the first one's unmount done)."""
    if os.path.ismount(target) and _libc.umount2(os.fsencode(target), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err == errno.EINVAL and not os.path.ismount(target):
            return
        raise OSError(err, f"umount {target}: {os.strerror(err)}")


def mount_root_fs(folder: Path) -> None:
    """Mount a small tmpfs of its own on an (empty) mount root: quotas mounted in it can be
    detached together (see _mountview.py). Not a bind onto itself: under a shared parent
    that would join the parent's peer group and every quota would be mounted twice."""
    # It holds only the quotas' mount points (empty folders).
    opts = b"size=1m,nr_inodes=1048576,mode=0711"
    rc = _libc.mount(b"tmpfs", os.fsencode(folder), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount tmpfs on {folder}: {os.strerror(err)}")


def unmount_root_fs(folder: Path) -> None:
    """Unmount the mount root's tmpfs unless a quota is still in it (EBUSY: kept)."""
    if os.path.ismount(folder):
        _libc.umount2(os.fsencode(folder), 0)
