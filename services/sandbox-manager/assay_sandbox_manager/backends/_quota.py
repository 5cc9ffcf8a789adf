"""Per-sandbox writable filesystem of a fixed size: a tmpfs mounted with ``size=``.

A tmpfs mount is one syscall (sub-millisecond), so create stays far under the 50 ms
target, and a full disk is ENOSPC inside that sandbox only. Without CAP_SYS_ADMIN the
directory stays a plain one and only RLIMIT_FSIZE bounds single files.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

__all__ = ["bind_self", "libc", "mount_quota", "unbind_self", "unmount_quota"]

libc = _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_MS_NOSUID, _MS_NODEV, _MS_BIND = 2, 4, 4096
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
    """Lazily unmount target if it is a mount point."""
    if os.path.ismount(target) and _libc.umount2(os.fsencode(target), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {target}: {os.strerror(err)}")


def bind_self(folder: Path) -> bool:
    """Make an empty folder a mount of its own (a bind onto itself), so one lazy unmount
    of it detaches every quota later mounted under it (see _mountview.py); False if not
    root. A bind left by a previous service is replaced, not stacked on."""
    if os.geteuid() != 0:
        return False
    unbind_self(folder)
    if _libc.mount(os.fsencode(folder), os.fsencode(folder), None, _MS_BIND, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"bind {folder} onto itself: {os.strerror(err)}")
    return True


def unbind_self(folder: Path) -> None:
    """Undo bind_self, unless a quota is still mounted under folder (EBUSY: kept).

    os.path.ismount cannot tell a bind of a folder onto itself (same device): unmount
    until the kernel says it is not a mount (EINVAL) or is busy."""
    if os.geteuid() != 0:
        return
    for _ in range(8):
        if _libc.umount2(os.fsencode(folder), 0) != 0:
            return
