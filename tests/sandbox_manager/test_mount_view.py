"""A sandbox's bwrap starts from a mount namespace without the other sandboxes' quotas
(see _mountview.py): its start cost does not grow with the number of live sandboxes, and
the view changes nothing in the host's namespace."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from assay_sandbox_manager.backends import BubblewrapBackend, SandboxSpec
from assay_sandbox_manager.backends._resident import PipeChannel

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="quota mounts need root")

SPEC = SandboxSpec(memory_mb=512, max_processes=64, disk_mb=16, exec_timeout_s=30)


def _mountpoints(pid: int | str) -> list[str]:
    """Mount points in a process's mount namespace, as mountinfo says them."""
    with open(f"/proc/{pid}/mountinfo") as f:
        return [line.split()[4] for line in f]


def _bwrap_pid(be: BubblewrapBackend, sid: str) -> int:
    """The pid bwrap runs as (the channel's process: its helpers exec, they do not fork)."""
    channel = be._residents[sid]
    assert isinstance(channel, PipeChannel)
    return channel.proc.pid


def _make(be: BubblewrapBackend, made: list[str]) -> str:
    sid = f"v-{uuid.uuid4().hex[:10]}"
    be.create(SPEC, sid, {})
    made.append(sid)
    assert be.exec(sid, ["true"], timeout_s=30).exit_code == 0
    return sid


def test_bwrap_starts_without_other_quotas(host_dirs: Path, rootfs: Path) -> None:
    be = BubblewrapBackend(host_dirs / "view-state", host_dirs / "view-seals", rootfs=rootfs)
    root = str(be.dirs.mount_root)
    ns_before = os.readlink("/proc/self/ns/mnt")
    made: list[str] = []
    try:
        first = _make(be, made)
        alone = _mountpoints(_bwrap_pid(be, first))
        for _ in range(4):
            _make(be, made)
        last = made[-1]
        seen = _mountpoints(_bwrap_pid(be, last))
        # No quota (own or other) under the mount root; the own one at the view folder.
        assert not [m for m in seen if m.startswith(root + "/") or m == root], seen
        assert seen.count(str(be.dirs.view_dir)) == 1
        # As many mounts as the first sandbox saw alone: the count does not grow.
        assert len(seen) == len(alone)
        # The sandbox works on its own quota: a file written inside is on the host's path.
        be.exec(last, ["sh", "-c", "echo hi > /workspace/f"], timeout_s=30)
        assert (be.dirs.workspace(last) / "f").read_text() == "hi\n"
        assert not (be.dirs.workspace(first) / "f").exists()
        # Nothing reached the host's namespace: every quota is there, the view folder is
        # no mount, and no thread of this process was left in a view.
        host = _mountpoints("self")
        assert all(str(be.dirs.mount(s)) in host for s in made)
        assert str(be.dirs.view_dir) not in host
        for tid in os.listdir("/proc/self/task"):
            assert os.readlink(f"/proc/self/task/{tid}/ns/mnt") == ns_before
        assert os.readlink("/proc/self/ns/mnt") == ns_before
    finally:
        for sid in made:
            be.destroy(sid)
    assert not be.dirs.mount_root.exists()
    assert str(be.dirs.mount_root) not in _mountpoints("self")


def test_disk_quota_still_holds_in_view(host_dirs: Path, rootfs: Path) -> None:
    """The bound view is the sandbox's own tmpfs of disk_mb, not the host folder under it."""
    be = BubblewrapBackend(host_dirs / "view-state2", host_dirs / "view-seals2", rootfs=rootfs)
    made: list[str] = []
    try:
        sid = _make(be, made)
        _make(be, made)
        res = be.exec(
            sid,
            ["sh", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=64 2>&1; df -m /tmp"],
            timeout_s=30,
        )
        assert b"No space left" in res.stdout, res.stdout
        assert os.path.getsize(be.dirs.workspace(sid) / "big") <= 16 * 1024 * 1024
    finally:
        for s in made:
            be.destroy(s)
