"""Attacks on per-sandbox limits: shared uids, /dev as free disk, memory spread over children,
and a sandbox whose cgroups were taken away."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from assay_sandbox_manager.backends import (
    BubblewrapBackend,
    DockerBackend,
    ExecResult,
    SandboxBackend,
    SandboxSpec,
)
from assay_sandbox_manager.backends._bubblewrap import _join_failure, spawner
from assay_sandbox_manager.backends._cgroups import (
    JOIN_FAILED,
    CgroupHost,
    SandboxCgroups,
    host_cgroups,
)
from assay_sandbox_manager.backends._uids import UID_BASE, UID_SPAN, UidRegistry
from tests.fork_bomb import tagged_processes

MakeSandbox = Callable[..., str]

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="per-sandbox uids need root")


def _cgroups_here() -> CgroupHost:
    """This host's sandbox cgroup layout; the test is skipped where none can be made."""
    host = host_cgroups()
    if host is None:
        pytest.skip("this host lets no cgroup be made for a sandbox (see docs/sandboxes.md)")
    return host


@root_only
def test_same_id_in_two_state_dirs_gets_two_uids(host_dirs: Path, rootfs: Path) -> None:
    """Destroying one instance's sandbox must not kill another instance's same-named one."""
    spec = SandboxSpec(backend="bubblewrap", memory_mb=768, max_processes=64, disk_mb=64)
    a = BubblewrapBackend(host_dirs / "uid-a", host_dirs / "snap-a", rootfs=rootfs)
    b = BubblewrapBackend(host_dirs / "uid-b", host_dirs / "snap-b", rootfs=rootfs)
    sid = "same-id"
    a.create(spec, sid, {})
    b.create(spec, sid, {})
    try:
        assert a.dirs.meta(sid).uid != b.dirs.meta(sid).uid
        got: list[ExecResult] = []
        running = threading.Thread(
            target=lambda: got.append(b.exec(sid, "sleep 2; echo survived", timeout_s=30))
        )
        running.start()
        threading.Event().wait(0.7)  # b's command is running when a's sandbox goes
        a.destroy(sid)
        running.join()
        assert got and got[0].stdout == b"survived\n", got
    finally:
        for be in (a, b):
            if any(s.sandbox_id == sid for s in be.list_live()):
                be.destroy(sid)


def test_dev_is_not_free_disk(backend: SandboxBackend, sandbox: str) -> None:
    """/dev and /dev/shm hold little, and /dev/shm shares the 64 MB disk quota (bubblewrap)."""
    fill = (
        "for i in $(seq 10); do dd if=/dev/zero of={d}/fill$i bs=1M count=16 2>/dev/null; done; "
        "du -cm {d}/fill* 2>/dev/null | tail -1 | cut -f1; true"
    )
    for d in ("/dev", "/dev/shm", "/workspace"):
        res = backend.exec(sandbox, fill.format(d=d), timeout_s=60)
        assert int(res.stdout or b"0") <= 64, (d, res)
    if backend.name == "bubblewrap":
        # /dev/shm and /workspace together, on one quota.
        res = backend.exec(sandbox, "du -cm /dev/shm/fill* /workspace/fill* | tail -1 | cut -f1")
        assert int(res.stdout) <= 64, res


_HOG = (
    "import os, sys, time\n"
    "for i in range(3):\n"
    "    if os.fork() == 0:\n"
    "        x = b'x' * (900 * 1024 * 1024)\n"
    "        open(f'/workspace/held-{i}', 'w').close()\n"
    "        time.sleep(4)\n"
    "        os._exit(0)\n"
    "for _ in range(3):\n"
    "    os.wait()\n"
)


def test_memory_is_limited_per_sandbox(
    backend: SandboxBackend, make_sandbox: MakeSandbox, spec: SandboxSpec
) -> None:
    """Three children of 900 MB under memory_mb=1024 must not all hold their memory at once."""
    if backend.name == "bubblewrap":
        _cgroups_here()
    sid = "mem-" + make_sandbox().removeprefix("t-")
    backend.create(spec.model_copy(update={"memory_mb": 1024}), sid, {})
    try:
        backend.exec(sid, ["python3", "-c", _HOG], timeout_s=60)
        held = [f for f in backend.list_files(sid) if f.path.startswith("held-")]
        assert len(held) < 3, held
        assert backend.exec(sid, "echo alive").stdout == b"alive\n"
    finally:
        backend.destroy(sid)


@root_only
def test_a_sandbox_whose_cgroups_went_is_limited_again(host_dirs: Path, rootfs: Path) -> None:
    """Groups removed under a sandbox (a host clean-up) are made again when its resident
    restarts: the commands run limited, never in the service's own group."""
    host = _cgroups_here()
    spec = SandboxSpec(backend="bubblewrap", memory_mb=768, max_processes=64, disk_mb=64)
    be = BubblewrapBackend(host_dirs / "regrow", host_dirs / "snap-regrow", rootfs=rootfs)
    sid = "regrow"
    be.create(spec, sid, {})
    try:
        uid = be.dirs.meta(sid).uid
        be._drop_resident(sid)  # its processes go; then so do its groups
        groups = host.existing(f"sandbox-{uid}")
        assert groups.remove(tries=200), "the dropped resident's processes did not exit"
        res = be.exec(sid, "echo ran", timeout_s=30)
        assert res.stdout == b"ran\n", res
        for folder in groups.folders:  # the sandbox's cgroup namespace hides them inside
            assert (folder / "cgroup.procs").read_text().split(), f"{folder} holds nothing"
            limit = (
                "pids.max"
                if host.version == 2 or "pids" in folder.parts
                else "memory.limit_in_bytes"
            )
            assert (folder / limit).read_text().strip() != "max"
    finally:
        be.destroy(sid)


@root_only
def test_groups_still_busy_at_destroy_keep_their_uid_until_they_go(
    host_dirs: Path, rootfs: Path
) -> None:
    """A destroy whose killed processes have not yet left their groups (a busy host) does
    not wait for them, sweep the host's processes or leak the groups: the uid stays claimed,
    so no new sandbox joins them, and a later destroy removes them and frees it."""
    host = _cgroups_here()
    spec = SandboxSpec(backend="bubblewrap", memory_mb=768, max_processes=64, disk_mb=64)
    be = BubblewrapBackend(host_dirs / "drain", host_dirs / "snap-drain", rootfs=rootfs)
    be.create(spec, "held", {})
    uid = be.dirs.meta("held").uid
    groups = host.existing(f"sandbox-{uid}")
    # A child group keeps a group from being removed, as a process that has not exited does.
    pins = [folder / "pin" for folder in groups.folders]
    for pin in pins:
        pin.mkdir()
    claim = be._uids.folder / str(uid)
    try:
        be.destroy("held")
        assert all(f.exists() for f in groups.folders)
        assert claim.is_dir(), "the uid was freed while its groups still stood"
        assert not be.dirs.root("held").exists()  # the rest of the sandbox is gone
        be.create(spec, "held", {})  # same id, same state dir: the same first uid to try
        assert be.dirs.meta("held").uid != uid
        assert claim.is_dir()
    finally:
        for pin in pins:
            pin.rmdir()
    be.destroy("held")
    assert not any(f.exists() for f in groups.folders)
    assert not claim.exists()


@root_only
def test_a_new_backend_sweeps_groups_no_one_owns(
    host_dirs: Path, rootfs: Path, tmp_path: Path
) -> None:
    """Groups a stopped service left (its sandboxes' processes still exiting when it went)
    are removed when a backend starts on the host; claimed, young or busy ones stay."""
    host = _cgroups_here()
    registry = UidRegistry(tmp_path / "uids")
    uids = [UID_BASE + UID_SPAN - 1 - i for i in range(4)]  # far from the live ones
    stale, claimed, young, busy = (host.create(f"sandbox-{u}", 64, 8) for u in uids)
    (registry.folder / str(uids[1])).mkdir(parents=True)
    holder = subprocess.Popen(["sleep", "60"])
    try:
        for folder in busy.folders:
            (folder / "cgroup.procs").write_text(str(holder.pid))
        old = time.time() - 3600
        for groups in (stale, claimed, busy):
            for folder in groups.folders:
                os.utime(folder, (old, old))
        assert host.sweep(lambda name: registry.claimed(int(name.split("-")[1]))) >= 1
        assert not any(f.exists() for f in stale.folders)
        for kept in (claimed, young, busy):
            assert all(f.exists() for f in kept.folders)
        # A backend starting on the host sweeps with the host's own registry.
        left = host.create(f"sandbox-{UID_BASE + UID_SPAN - 5}", 64, 8)
        for folder in left.folders:
            os.utime(folder, (old, old))
        BubblewrapBackend(host_dirs / "sweeper", host_dirs / "snap-sweeper", rootfs=rootfs)
        assert not any(f.exists() for f in left.folders)
    finally:
        holder.kill()
        holder.wait()
        for groups in (stale, claimed, young, busy):
            assert groups.remove(tries=200)


def test_a_failed_cgroup_join_says_why(tmp_path: Path, rootfs: Path) -> None:
    """A start that cannot join its group exits JOIN_FAILED and the reason reaches the error."""
    errors = tmp_path / "join.err"
    gone = SandboxCgroups((tmp_path / "no-such-group",))
    argv = [spawner(rootfs), *gone.spawn_args(errors), "--", "/bin/echo", "must not run"]
    proc = subprocess.run(argv, capture_output=True)
    assert proc.returncode == JOIN_FAILED
    assert proc.stdout == b""  # nothing past the join ran
    why = _join_failure(proc.returncode, errors)
    assert "could not join its cgroups" in why and "no-such-group" in why, why
    assert _join_failure(1, errors) == ""  # any other status is not the join's


def _small_container(
    backend: DockerBackend, image: str, *, cpu_seconds: int, max_processes: int
) -> str:
    """A small Docker sandbox (256 MB, 32 MB of disk, 4 KiB of output) under the given caps;
    its id."""
    spec = SandboxSpec(
        backend="docker",
        image=image,
        cpu_seconds=cpu_seconds,
        memory_mb=256,
        max_processes=max_processes,
        file_size_mb=8,
        disk_mb=32,
        exec_timeout_s=30,
        output_cap_bytes=4096,
    )
    sid = f"t-{uuid.uuid4().hex[:12]}"
    backend.create(spec, sid, {"assay.campaign_id": "c1", "assay.run_id": sid})
    return sid


@pytest.mark.docker
def test_processes_killed_at_a_timeout_stop_counting_before_the_reply(
    docker_backend: DockerBackend, docker_image: str
) -> None:
    """In a container the resident is not PID 1 (the keep-alive is): the orphans a timed-out
    command left were PID 1's to reap after the kill, so the next command could find the
    process cap still full of zombies (a fork bomb's next `echo` came back empty in a loaded
    CI run). PID 1 is stopped here, so only the resident can reap them before it replies."""
    sid = _small_container(docker_backend, docker_image, cpu_seconds=30, max_processes=64)
    try:
        # Zombies hold their pids (and their place under the cap) until reaped.
        zombies = """awk '/^State:/ && $2 == "Z" {split(FILENAME, p, "/"); print p[3]}' \
            /proc/[0-9]*/status 2>/dev/null"""
        assert docker_backend.exec(sid, zombies).stdout == b""
        # PID 1 forks nothing of its own (the resident in its init mode): what the kill
        # leaves for it to reap while it is stopped is none.
        children = docker_backend.exec(sid, "cat /proc/1/task/1/children").stdout.split()
        resident = docker_backend.exec(sid, "pgrep -x resident").stdout.split()
        assert set(children) <= set(resident), (children, resident)
        container = docker_backend.client.api.inspect_container(f"assay-sbx-{sid}")
        init = int(container["State"]["Pid"])
        os.kill(init, signal.SIGSTOP)
        try:
            orphans = "for i in $(seq 20); do sleep 600 & done; sleep 600"
            assert docker_backend.exec(sid, orphans, timeout_s=2).timed_out
            after = docker_backend.exec(sid, zombies)
            assert after.stdout.split() == [], after
        finally:
            os.kill(init, signal.SIGCONT)
    finally:
        docker_backend.destroy(sid)


def _resident_pids(container_pid: int) -> list[int]:
    """Host pids of the residents serving commands in the container (not its PID 1)."""
    ns = os.readlink(f"/proc/{container_pid}/ns/pid")
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        pid = int(cmdline.parent.name)
        try:
            mine = pid != container_pid and os.readlink(f"/proc/{pid}/ns/pid") == ns
            if mine and cmdline.read_bytes().startswith(b"/usr/libexec/assay/resident\0"):
                found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.docker
def test_a_resident_that_never_answers_with_the_cap_full_still_loses_its_command(
    docker_backend: DockerBackend, docker_image: str
) -> None:
    """The host's fallback when a container's resident does not answer (here: stopped) was
    one more `docker exec` to kill every process; with the process cap full that exec
    cannot start, and the command's processes lived on, holding the cap, so no resident
    could start again. The container is restarted instead: PID 1 killed, its whole PID
    namespace goes with it, its files stay."""
    sid = _small_container(docker_backend, docker_image, cpu_seconds=60, max_processes=16)
    tag = uuid.uuid4().hex
    try:
        assert docker_backend.exec(sid, "echo up | tee kept").stdout == b"up\n"
        container = docker_backend.client.api.inspect_container(f"assay-sbx-{sid}")
        init = int(container["State"]["Pid"])
        [resident] = _resident_pids(init)
        # bash keeps retrying its forks: the cap stays full, not one slot short.
        fill = f"export ASSAY_BOMB_TAG={tag}; exec bash -c 'while :; do sleep 600 & done'"
        outcome: list[object] = []
        worker = threading.Thread(
            target=lambda: outcome.append(docker_backend.exec(sid, fill, timeout_s=3))
        )
        worker.start()
        time.sleep(1.5)  # the cap is full by now
        os.kill(resident, signal.SIGSTOP)
        worker.join(timeout=60)
        [lost] = outcome
        assert getattr(lost, "timed_out", False), lost
        assert tagged_processes(tag) == [], "nothing of the command is left"
        # Killed from outside, not by an exec that happened to find a slot (one CI run's
        # did not: the command outlived it).
        after = docker_backend.client.api.inspect_container(f"assay-sbx-{sid}")
        assert after["State"]["StartedAt"] != container["State"]["StartedAt"]
        assert docker_backend.exec(sid, "echo alive; cat kept").stdout == b"alive\nup\n"
    finally:
        docker_backend.destroy(sid)
