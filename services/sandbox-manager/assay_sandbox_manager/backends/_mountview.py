"""A sandbox's bwrap starts from a mount namespace without the other sandboxes' quotas.

bwrap reads the whole mount table (/proc/self/mountinfo) once per mount it makes (a dozen
per start), and the table it starts from is the one it is forked in: the host's, which
holds one quota tmpfs per live sandbox, so every start got slower as more sandboxes were
live. Instead, the one thread that forks bwrap (see _bubblewrap._SPAWNER) enters, for each
start, a private copy of the host's mount namespace, binds there the sandbox's own quota
on the (empty) view folder, lazily unmounts the mount root (a tmpfs of its own, see
_quota.mount_root_fs) with every quota in it, forks bwrap and goes back to the host's
namespace. Syscalls only, no helper process; one unmount, not one per quota (each costs
an RCU grace period). A sandbox's namespaces never even hold the other sandboxes' quotas.

Private first, so nothing done in the copy reaches the host: where the mount root sits
under a shared mount (systemd hosts; the compose and Kubernetes deployments share
/var/tmp/assay with dockerd), an unmount in a peer would unmount the host's quotas too.
The host's namespace and its propagation are left as they were.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from ._errors import SandboxError
from ._quota import libc

__all__ = ["MountView", "ViewFailed", "host_namespace"]

_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_MNT_DETACH, _UMOUNT_NOFOLLOW = 2, 8


class ViewFailed(SandboxError):
    """The private mount namespace of a start could not be made (or left)."""


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise ViewFailed(f"mount view: {what}: {os.strerror(err)}")


class _Host:
    """The host's mount namespace, to go back to after each start."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.broken = False
        self.lock = threading.Lock()

    def usable(self) -> bool:
        if self.broken:
            # The forking thread may be stuck in a view: a start without one would fork
            # bwrap there, where other quotas are missing and its own may be too.
            raise ViewFailed("mount view: the spawner could not go back to the host namespace")
        if os.geteuid() != 0:
            return False
        if self.fd is None:
            self.fd = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        return True


_HOST = _Host()


def host_namespace() -> bool:
    """Whether starts get a view (root); ViewFailed after a failure to go back."""
    with _HOST.lock:
        return _HOST.usable()


class MountView:
    """One sandbox's start: its own quota seen at view_dir, no quota in the mount root."""

    def __init__(self, own: Path, view_dir: Path, mount_root: Path) -> None:
        self.own, self.view_dir, self.mount_root = own, view_dir, mount_root

    def path(self, host: Path) -> Path:
        """Where a host path in the sandbox's quota is seen from the view."""
        return self.view_dir / host.relative_to(self.own)

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """Run the body (a fork) in the view; the calling thread's namespace only.

        unshare(CLONE_NEWNS) also unshares the thread's filesystem context, so the rest of
        the process keeps the host's namespace throughout. If going back fails, that thread
        must not fork anything again: every later start is refused.
        """
        with _HOST.lock:
            if not _HOST.usable():
                raise ViewFailed("mount view: needs root")
            dev = os.stat(self.own).st_dev
            _check(libc.unshare(_CLONE_NEWNS), "unshare")
            try:
                _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "private")
                own, view = os.fsencode(self.own), os.fsencode(self.view_dir)
                _check(libc.mount(own, view, None, _MS_BIND, None), "bind")
                root = os.fsencode(self.mount_root)
                _check(libc.umount2(root, _MNT_DETACH | _UMOUNT_NOFOLLOW), "detach")
                if os.stat(self.view_dir).st_dev != dev:
                    raise ViewFailed("mount view: the view is not the sandbox's quota")
                yield
            finally:
                if libc.setns(_HOST.fd, _CLONE_NEWNS) != 0:
                    _HOST.broken = True
