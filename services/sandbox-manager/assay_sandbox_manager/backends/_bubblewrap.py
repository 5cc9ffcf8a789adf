"""Bubblewrap backend: the embedded default, no daemon needed.

Each sandbox is one ``bwrap`` over its persistent /workspace and /tmp, started on first
use, whose PID 1 is the resident process that runs every command (see _resident.py):
every namespace unshared (no network at all, own PID namespace so a kill of bwrap kills
the whole tree), the runtime rootfs read-only as /, the environment cleared. When the service
is root, bwrap runs as a host uid of its own per sandbox (200000+, unique on the host, see
_uids.py), so RLIMIT_NPROC counts that sandbox only, and an escaped process owns nothing on
the host; where the host lets the service make cgroups, the sandbox's whole tree also has one
memory and one process limit (see _cgroups.py). /dev is read-only and /dev/shm is a folder
of the sandbox's disk quota, so neither is free space. As root, bwrap is forked in a private
mount namespace holding no other sandbox's quota (see _mountview.py): its setup cost does
not grow with the number of live sandboxes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from assay.service import raise_open_files_limit

from ..extension import EXTENSION_ENV, EXTENSION_MOUNT
from ..runtime import default_rootfs
from ._cgroups import JOIN_FAILED, SandboxCgroups, host_cgroups
from ._errors import SandboxBackendUnavailable, SandboxError, SandboxNotFound
from ._hostdirs import HostDirs, SandboxMeta, WorkspaceFiles, check_sandbox_id, check_traversable
from ._models import SandboxInfo, SandboxSpec
from ._mounts import GATEWAY_MOUNT, gateway_folder, opt_binds
from ._mountview import MountView, ViewFailed, host_namespace
from ._procs import kill_uid_processes
from ._resident import (
    RESIDENT_ARGV,
    RESIDENT_DIR,
    Channel,
    PipeChannel,
    ResidentExec,
    ResidentGone,
    install_scripts,
)
from ._uids import UID_BASE, UidRegistry

__all__ = ["BubblewrapBackend"]

_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bwrap-spawn")
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    # Caches (matplotlib's font list, pip, ...) go to the private /tmp, not into the
    # workspace, where they would be sealed as if they were the agent's work.
    "HOME": "/tmp",
    "XDG_CACHE_HOME": "/tmp/.cache",
    "MPLCONFIGDIR": "/tmp/.matplotlib",
    "LANG": "C.UTF-8",
    "MPLBACKEND": "Agg",
    "USER": "agent",
}


def _join_failure(status: int, errors: Path) -> str:
    """What the cgroup join said, when that is why the sandbox did not start."""
    if status != JOIN_FAILED:
        return ""
    try:
        with errors.open("rb") as f:
            said = f.read(500).decode(errors="replace").strip()
    except OSError:
        said = ""
    return f"it could not join its cgroups ({said or 'no message'})"


SPAWN = "usr/libexec/assay/spawn"
"""The start helper, built with the resident into the runtime rootfs (deploy/sandbox/spawn.c)."""


def spawner(rootfs: Path) -> str:
    """The rootfs's start helper, checked before the service runs it (as root, on the host).

    Only a file that no one but the service's own user (or root) could have written is run:
    the rootfs is the sandboxes' read-only /, and a helper others can replace would run
    their code with the service's rights."""
    path = rootfs / SPAWN
    try:
        st = path.stat()
    except OSError as e:
        raise SandboxBackendUnavailable(
            f"sandbox backend bubblewrap: the runtime at {rootfs} has no start helper "
            f"({e.strerror}); it predates this version: rebuild it "
            "(deploy/sandbox/build-rootfs.sh, run by `make install`)"
        ) from e
    if (
        not stat.S_ISREG(st.st_mode)
        or st.st_uid not in (0, os.geteuid())
        or (st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))
    ):
        raise SandboxBackendUnavailable(
            f"sandbox backend bubblewrap: {path} is not a regular file that only root or this "
            "service's user can write; it is not run"
        )
    return str(path)


def _gateway_mount(sandbox_id: str, spec: SandboxSpec) -> list[str]:
    """bwrap arguments binding the run's model gateway folder (the resident forwards
    127.0.0.1:GATEWAY_PORT to its socket, see deploy/sandbox/resident.c)."""
    folder = gateway_folder(sandbox_id, spec, foreign_uid=os.geteuid() == 0)
    return [] if folder is None else ["--ro-bind", str(folder), GATEWAY_MOUNT]


def _opt(sandbox_id: str, spec: SandboxSpec) -> tuple[list[str], dict[str, str]]:
    """bwrap arguments and environment of the run's extension and bundle under /opt."""
    binds = opt_binds(sandbox_id, spec, foreign_uid=os.geteuid() == 0)
    if not binds:
        return [], {}
    # The rootfs's /opt is read-only: mount points are made in a tmpfs, made read-only after.
    args = ["--tmpfs", "/opt"]
    for inside, host in binds.items():
        args += ["--ro-bind", str(host), inside]
    args += ["--remount-ro", "/opt"]
    return args, EXTENSION_ENV if EXTENSION_MOUNT in binds else {}


class BubblewrapBackend(WorkspaceFiles, ResidentExec):
    """Sandboxes as one bwrap each (started on first use) over a per-sandbox tmpfs."""

    name = "bubblewrap"

    def __init__(self, state_dir: Path, seal_dir: Path, rootfs: Path | None = None) -> None:
        """rootfs: the read-only root; None means the cached rootfs of the current recipe."""
        bwrap = shutil.which("bwrap")
        if not bwrap:
            raise SandboxBackendUnavailable("sandbox backend bubblewrap: bwrap missing")
        self._bwrap = os.path.abspath(bwrap)
        self.dirs = HostDirs(state_dir, seal_dir, own_root=True)
        self._rootfs = rootfs
        self._uids = UidRegistry()
        self._init_residents()
        self._draining: dict[int, tuple[SandboxCgroups, Path]] = {}
        """uid -> the groups of a destroyed sandbox whose processes were still exiting,
        and the owner its uid is claimed for (released once the groups are gone)."""
        host = host_cgroups()
        if host is not None:
            host.sweep(self._group_owned)
        # Two pipes per live sandbox: the backend may outlive a soft limit of 1024.
        raise_open_files_limit()

    def _reserve_uid(self, sandbox_id: str) -> int:
        """A host uid of the sandbox's own (root), or the service's uid."""
        if os.geteuid() != 0:
            return os.getuid()
        return self._uids.claim(self.dirs.root(sandbox_id).resolve(), sandbox_id)

    @staticmethod
    def _cgroups(uid: int) -> SandboxCgroups | None:
        """The sandbox's cgroups (named by its host-unique uid), where the host has them."""
        host = host_cgroups()
        return host.existing(f"sandbox-{uid}") if host and uid >= UID_BASE else None

    @staticmethod
    def _make_cgroups(meta: SandboxMeta) -> SandboxCgroups | None:
        """Make (or remake, with the same limits) the sandbox's cgroups, where the host has them."""
        host = host_cgroups()
        if not host or meta.uid < UID_BASE:
            return None
        spec = meta.spec
        # The quota tmpfs's pages are charged to the writer: memory plus disk.
        return host.create(
            f"sandbox-{meta.uid}", spec.memory_mb + spec.disk_mb, spec.max_processes + 7
        )

    def create(self, spec: SandboxSpec, sandbox_id: str, labels: Mapping[str, str]) -> SandboxInfo:
        """Make the workspace (tmpfs quota) and record the sandbox; bwrap starts per exec."""
        check_sandbox_id(sandbox_id)
        self._drain()
        rootfs = self._rootfs or default_rootfs()
        if rootfs is None or not (rootfs / "usr").is_dir():
            raise SandboxBackendUnavailable(f"sandbox {sandbox_id}: no runtime rootfs at {rootfs}")
        if os.geteuid() == 0:
            # bwrap runs as the sandbox uid: it must be able to reach the rootfs by path.
            check_traversable(sandbox_id, rootfs)
        spawner(rootfs)
        _gateway_mount(sandbox_id, spec)
        _opt(sandbox_id, spec)  # an extension is built now (once per list), not on first exec
        uid = self._reserve_uid(sandbox_id)
        try:
            meta = self.dirs.prepare(sandbox_id, "bubblewrap", spec, labels, uid, uid, rootfs)
        except BaseException:
            self._release_uid(uid, self.dirs.root(sandbox_id).resolve())
            raise
        try:
            self._make_cgroups(meta)
        except OSError as e:
            self.destroy(sandbox_id)
            raise SandboxBackendUnavailable(f"sandbox {sandbox_id}: cgroup: {e}") from e
        # Started now, it boots while the runner gets ready: the first command need not wait.
        with contextlib.suppress(SandboxError):
            self._residents[sandbox_id] = self._start_resident(sandbox_id, meta)
        return self.dirs.info(meta)

    def _start_resident(self, sandbox_id: str, meta: SandboxMeta) -> Channel:
        """Start bwrap with the resident as the namespace's PID 1 (its death ends the sandbox)."""
        spec = meta.spec
        own = self.dirs.mount(sandbox_id)
        scripts = install_scripts(own)
        root = os.geteuid() == 0
        try:
            views = meta.uid >= UID_BASE and host_namespace()
        except ViewFailed as e:
            raise SandboxBackendUnavailable(f"sandbox {sandbox_id}: {e}") from e
        if views and os.path.ismount(self.dirs.mount_root):
            view = MountView(own, self.dirs.view_dir, self.dirs.mount_root)
        else:
            view = None  # not root, or a previous version's quotas in a plain folder
        seen = view.path if view else (lambda p: p)
        extension, extension_env = _opt(sandbox_id, spec)
        mb = 1024 * 1024
        # bwrap's helpers, the resident, its gateway forwarder thread and the Python kernel
        # count against NPROC too.
        limits = {
            "cpu": spec.cpu_seconds,
            "as": spec.memory_mb * mb,
            "nproc": spec.max_processes + 7,
            "fsize": spec.file_size_mb * mb,
            "core": 0,
            "nofile": 1024,
        }
        bw = [
            self._bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--as-pid-1",
            "--uid",
            "1000",
            "--gid",
            "1000",
            "--hostname",
            "sandbox",
            "--ro-bind",
            str(meta.rootfs),
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--bind",
            str(seen(self.dirs.workspace(sandbox_id))),
            "/workspace",
            "--bind",
            str(seen(self.dirs.tmp(sandbox_id))),
            "/tmp",
            "--tmpfs",
            "/run",
            "--ro-bind",
            str(seen(scripts)),
            RESIDENT_DIR,
            *_gateway_mount(sandbox_id, spec),
            *extension,
            # bwrap's /dev is an unbounded tmpfs: shared memory goes to the disk quota
            # instead, and /dev itself is read-only (its devices stay usable).
            "--bind",
            str(seen(self.dirs.shm(sandbox_id))),
            "/dev/shm",
            "--remount-ro",
            "/dev",
            "--cap-drop",
            "ALL",
            "--clearenv",
        ]
        for k, v in {**SANDBOX_ENV, **extension_env}.items():
            bw += ["--setenv", k, v]
        bw += ["--chdir", "/workspace", "--", *RESIDENT_ARGV]
        try:
            # Made again at each start: a group that went since (a host clean-up) comes back.
            cgroups = self._make_cgroups(meta)
        except OSError as e:
            raise ResidentGone(f"sandbox {sandbox_id}: cgroup: {e}") from e
        join_errors = self.dirs.root(sandbox_id) / "cgroup-join.err"
        # One exec joins the groups as root, drops to the sandbox uid, sets the rlimits and
        # execs bwrap (deploy/sandbox/spawn.c): a process cannot leave its groups on its own.
        # The helper runs on the host, so it is the current runtime's, also for a sandbox
        # made on an older one (a service upgraded under live runs).
        helper = spawner(self._rootfs or default_rootfs())
        argv = [helper, *(cgroups.spawn_args(join_errors) if cgroups else [])]
        if root:
            argv += ["--ids", f"{meta.uid}:{meta.gid}"]
        for name, value in limits.items():
            argv += ["--limit", f"{name}={value}"]
        argv += ["--", *bw]

        def fork() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                start_new_session=True,
            )

        def spawn() -> subprocess.Popen[bytes]:
            if view is None:
                return fork()
            with view.entered():
                return fork()

        try:
            # --die-with-parent watches the thread that forks bwrap: a long-lived one.
            proc = _SPAWNER.submit(spawn).result()
        except (OSError, ViewFailed) as e:
            raise SandboxBackendUnavailable(f"sandbox {sandbox_id}: cannot start bwrap: {e}") from e
        return PipeChannel(proc, explain=lambda status: _join_failure(status, join_errors))

    def destroy(self, sandbox_id: str) -> None:
        """Kill the sandbox's processes, unmount and delete its state."""
        check_sandbox_id(sandbox_id)
        self._drain()
        root = self.dirs.root(sandbox_id)
        if not root.exists():
            raise SandboxNotFound(f"sandbox {sandbox_id}: not found in {self.dirs.state_dir}")
        try:
            uid: int | None = self.dirs.meta(sandbox_id).uid
        except SandboxError:
            uid = None  # half-made: no process can have started
        owner = root.resolve()
        self._drop_resident(sandbox_id)
        cgroups = self._cgroups(uid) if uid is not None else None
        # Every process of a sandbox is in its groups, which none can leave (joined as root
        # before the uid was dropped): killed through them, they need no sweep of the
        # host's processes, whose cost per destroy grows with the number of live sandboxes.
        if cgroups is not None and uid is not None and not cgroups.remove():
            # Killed but still exiting: the uid stays claimed, so that no new sandbox is
            # put in these groups with them, until a later destroy or create removes them.
            with self._guard:
                self._draining[uid] = (cgroups, owner)
            uid = None
        elif cgroups is None and uid is not None and uid >= UID_BASE:
            kill_uid_processes(uid)
        self.dirs.remove(sandbox_id)
        if uid is not None:
            self._release_uid(uid, owner)

    def _group_owned(self, name: str) -> bool:
        """Whether the group named sandbox-<uid> belongs to a claimed uid."""
        uid = name.removeprefix("sandbox-")
        return not uid.isdigit() or int(uid) < UID_BASE or self._uids.claimed(int(uid))

    def _drain(self) -> None:
        """Remove the groups of destroyed sandboxes that were still exiting, and give back
        the uids of those that are gone."""
        with self._guard:
            draining = list(self._draining.items())
        for uid, (cgroups, owner) in draining:
            if cgroups.remove(tries=1):
                with self._guard:
                    # Two threads may both see the groups gone: one gives the uid back.
                    mine = self._draining.pop(uid, None) is not None
                if mine:
                    self._release_uid(uid, owner)

    def _release_uid(self, uid: int, owner: Path) -> None:
        if uid >= UID_BASE:
            self._uids.release(uid, owner)

    def list_live(self) -> list[SandboxInfo]:
        """Sandboxes with a state folder (a previous service's included)."""
        out = []
        for sid in self.dirs.ids():
            try:
                out.append(self.dirs.info(self.dirs.meta(sid)))
            except SandboxError:
                # Half-made: listed so reconciliation destroys it too.
                out.append(SandboxInfo(sid, "bubblewrap", {}, self.dirs.workspace(sid)))
        return out
