"""Mounts a gone service left: a sandbox-manager killed with sandboxes live, its state dir
then deleted (an interrupted `assay run` whose run folder was removed, or a test's), left
its quotas mounted until the host rebooted. On this machine 2,466 such tmpfs mounts had
piled up from test runs, and every bwrap start paid for the longer mount table: a run at
concurrency 1 took 0.18 s instead of 0.08. A backend starting now reclaims the roots whose
state dir is gone, and only those."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from assay_sandbox_manager.backends import BubblewrapBackend, SandboxSpec

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="quota mounts need root")

SPEC = SandboxSpec(memory_mb=512, max_processes=64, disk_mb=16, exec_timeout_s=30)


def _mounted(root: Path) -> list[str]:
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    return [p for p in points if p == str(root) or p.startswith(f"{root}/")]


def test_a_gone_services_mounts_are_reclaimed_and_a_live_ones_kept(
    host_dirs: Path, rootfs: Path
) -> None:
    gone_state = host_dirs / "gone-state"
    gone = BubblewrapBackend(gone_state, host_dirs / "gone-seals", rootfs=rootfs)
    live = BubblewrapBackend(host_dirs / "live-state", host_dirs / "live-seals", rootfs=rootfs)
    try:
        gone.create(SPEC, "g1", {})
        live.create(SPEC, "l1", {})
        assert gone.exec("g1", "echo kept > /workspace/f", timeout_s=30).exit_code == 0
        gone_root = gone.dirs.mount_root
        gone.stop_commands("g1")  # its service killed: nothing runs, the mounts stay
        shutil.rmtree(gone_state)  # and its state dir removed
        assert _mounted(gone_root), "the test needs the gone service's quota still mounted"

        BubblewrapBackend(host_dirs / "next-state", host_dirs / "next-seals", rootfs=rootfs)

        assert _mounted(gone_root) == [] and not gone_root.exists()
        # The live service's sandbox is untouched: its quota mounted, its commands run.
        assert _mounted(live.dirs.mount_root)
        out = live.exec("l1", "echo alive > /workspace/f && cat /workspace/f", timeout_s=30)
        assert (out.exit_code, out.stdout) == (0, b"alive\n")
    finally:
        live.destroy("l1")
