"""A sandbox's bwrap starts from a mount namespace without the other sandboxes' quotas
(see _mountview.py): its start cost does not grow with the number of live sandboxes, and
the view changes nothing in the host's namespace."""

from __future__ import annotations

import os
import subprocess
import tempfile
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
        for _ in range(4):
            _make(be, made)
        last = made[-1]
        seen = _mountpoints(_bwrap_pid(be, last))
        host = _mountpoints("self")
        # No quota (own or other) in the mount root; the own one at the view folder.
        assert not [m for m in seen if m.startswith(root + "/") or m == root], seen
        assert seen.count(str(be.dirs.view_dir)) == 1
        # Otherwise the host's mounts (other tenants of this machine may add theirs since).
        assert set(seen) - {str(be.dirs.view_dir)} <= set(host)
        # The sandbox works on its own quota: a file written inside is on the host's path.
        be.exec(last, ["sh", "-c", "echo hi > /workspace/f"], timeout_s=30)
        assert (be.dirs.workspace(last) / "f").read_text() == "hi\n"
        assert not (be.dirs.workspace(first) / "f").exists()
        # Nothing reached the host's namespace: every quota is there, the view folder is
        # no mount, and no thread of this process was left in a view.
        host = _mountpoints("self")
        assert all(host.count(str(be.dirs.mount(s))) == 1 for s in made)
        assert str(be.dirs.view_dir) not in host
        for tid in os.listdir("/proc/self/task"):
            assert os.readlink(f"/proc/self/task/{tid}/ns/mnt") == ns_before
        assert os.readlink("/proc/self/ns/mnt") == ns_before
    finally:
        for sid in made:
            be.destroy(sid)
    assert not be.dirs.mount_root.exists()


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


def test_view_does_not_propagate_to_a_shared_host(
    host_dirs: Path, rootfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a shared mount (systemd hosts make / shared; the deployments share the mount
    root with dockerd), the view's unmounts stay in the view: the host keeps every quota."""
    # Under /run, as the default mount root: every level searchable by sandbox uids.
    shared = Path(tempfile.mkdtemp(prefix="assay-view-test-", dir="/run"))
    shared.chmod(0o711)
    subprocess.run(["mount", "--bind", str(shared), str(shared)], check=True)
    try:
        subprocess.run(["mount", "--make-shared", str(shared)], check=True)
        monkeypatch.setenv("ASSAY_SANDBOX_MOUNTS", str(shared))
        be = BubblewrapBackend(host_dirs / "view-state3", host_dirs / "view-seals3", rootfs=rootfs)
        assert be.dirs.mount_root.parent == shared
        made: list[str] = []
        try:
            for _ in range(3):
                _make(be, made)
            root = str(be.dirs.mount_root)
            seen = _mountpoints(_bwrap_pid(be, made[-1]))
            assert not [m for m in seen if m.startswith(root + "/") or m == root], seen
            assert seen.count(str(be.dirs.view_dir)) == 1
            # Every quota is still mounted on the host once (the unmounts did not propagate).
            host = _mountpoints("self")
            assert sorted(m for m in host if m.startswith(root + "/")) == sorted(
                str(be.dirs.mount(s)) for s in made
            )
            assert host.count(root) == 1
            assert str(be.dirs.view_dir) not in host
            for s in made:
                assert be.exec(s, ["true"], timeout_s=30).exit_code == 0
                be.write_file(s, "x", b"still there")
                assert be.read_file(s, "x") == b"still there"
        finally:
            for s in made:
                be.destroy(s)
        assert not [m for m in _mountpoints("self") if m.startswith(str(shared) + "/")]
    finally:
        subprocess.run(["umount", "--lazy", str(shared)], check=True)
        shared.rmdir()
