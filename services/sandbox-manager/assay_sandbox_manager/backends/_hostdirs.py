"""Per-sandbox host state shared by both backends.

Layout (one folder per sandbox under the state dir, so a restarted service finds its
orphans)::

    <state>/<sandbox_id>/meta.json        spec, labels, backend, host uid/gid
    <mounts>/<sandbox_id>/                tmpfs of spec.disk_mb (the disk quota)
    <mounts>/<sandbox_id>/workspace       -> /workspace (read-write)
    <mounts>/<sandbox_id>/tmp             -> /tmp (read-write, same quota)
    <mounts>/<sandbox_id>/shm             -> /dev/shm on bubblewrap (same quota)

When the service is root, bwrap runs as a per-sandbox uid that must reach its mount by
path, while the state dir may sit under a private home (/root is 0700): so the mounts live
under ``<ASSAY_SANDBOX_MOUNTS or /run/assay/sandboxes>/<hash of the state dir>``, every
level 0711. For bubblewrap (``own_root``), the mount root is a small tmpfs of its own,
and ``<mount root>.view`` an empty folder where a start's private mount namespace binds
that sandbox's quota (see _mountview.py). Without root the mounts sit under the state dir.

Copies for a seal go to ``<seals>/<sandbox_id>-<n>`` and survive destroy; they hold only
what the seal caps let in (see ``..seal``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..seal import SealCaps, SealCopy, copy_planned, plan_seal
from . import _fs
from ._errors import SandboxBackendUnavailable, SandboxError, SandboxExists, SandboxNotFound
from ._models import FileEntry, SandboxInfo, SandboxSpec
from ._quota import mount_quota, mount_root_fs, unmount_quota, unmount_root_fs

__all__ = [
    "OWNER_FILE",
    "HostDirs",
    "SandboxMeta",
    "check_sandbox_id",
    "check_traversable",
    "reclaim_orphan_roots",
]

log = logging.getLogger("assay.sandbox_manager")

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def check_sandbox_id(sandbox_id: str) -> None:
    """Reject ids that could not safely name a directory or a container."""
    if not _ID.fullmatch(sandbox_id):
        raise SandboxError(f"sandbox {sandbox_id!r}: invalid id (want [A-Za-z0-9_.-], 1-128)")


def check_traversable(sandbox_id: str, path: Path) -> None:
    """Every directory from / to path must be searchable by others (a sandbox uid)."""
    for p in [path, *path.parents]:
        if not p.stat().st_mode & 0o001:
            raise SandboxBackendUnavailable(
                f"sandbox {sandbox_id}: {p} is not searchable by sandbox uids (needed for {path})"
            )


def _default_mount_root(state_dir: Path) -> Path:
    if os.geteuid() != 0:
        return state_dir / ".mounts"
    base = Path(os.environ.get("ASSAY_SANDBOX_MOUNTS", "/run/assay/sandboxes"))
    key = hashlib.sha256(os.fsencode(state_dir.resolve())).hexdigest()[:16]
    return base / key


OWNER_FILE = ".owner"
"""In a mount root: the state dir it serves, so that a root outliving both its service and
its state dir can be told from a live one's."""


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or under root in this namespace, deepest first."""
    prefix = str(root)
    with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
        points = [line.split(" ")[1] for line in f if " " in line]
    # /proc/self/mounts writes spaces, tabs, newlines and backslashes as octal escapes.
    decoded = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), p) for p in points]
    mine = [p for p in decoded if p == prefix or p.startswith(prefix + "/")]
    return sorted(mine, key=lambda p: p.count("/"), reverse=True)


def reclaim_orphan_roots(base: Path, keep: Path) -> list[Path]:
    """Unmount and remove the mount roots under `base` whose state dir is gone: a
    sandbox-manager killed with sandboxes live (an interrupted `assay run`, a test's) whose
    state dir was then deleted left its quotas (tmpfs, holding what the agents wrote)
    mounted until the host rebooted, and every later bwrap start paid for the longer mount
    table (2,466 leftover mounts made a run at concurrency 1 take 0.18 s, not 0.08). A root
    with no `OWNER_FILE` (made before it existed) is left as it is; `keep` is the caller's.
    The roots reclaimed."""
    if not base.is_dir():
        return []
    gone: list[Path] = []
    for root in base.iterdir():
        if root == keep or root.name.endswith(".view") or not root.is_dir():
            continue
        try:
            owner = Path((root / OWNER_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if owner.exists():
            continue  # its service may be restarting: it reconciles its own sandboxes
        for point in _mounts_under(root):
            with contextlib.suppress(OSError):
                unmount_quota(Path(point))
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(root.with_name(root.name + ".view"), ignore_errors=True)
        gone.append(root)
    return gone


class SandboxMeta(BaseModel):
    """What a backend persists about a sandbox (read back after a service restart)."""

    model_config = ConfigDict(frozen=True)

    sandbox_id: str
    backend: Literal["bubblewrap", "docker"]
    labels: dict[str, str]
    spec: SandboxSpec
    uid: int
    gid: int
    rootfs: str | None = None
    """Read-only root of a bubblewrap sandbox."""


class HostDirs:
    """Creates, reads and removes the per-sandbox host directories."""

    def __init__(
        self,
        state_dir: Path,
        seal_dir: Path,
        mount_root: Path | None = None,
        *,
        own_root: bool = False,
    ) -> None:
        """own_root: the mount root is a filesystem of its own (root only), so one lazy
        unmount of it detaches every quota (see _mountview.py)."""
        self.state_dir = state_dir
        self.own_root = own_root and os.geteuid() == 0
        self.seal_dir = seal_dir
        self.mount_root = mount_root or _default_mount_root(state_dir)
        # The mount root's own filesystem is unmounted when the last sandbox goes: not while
        # a prepare is mounting a new quota in it.
        self._root_lock = threading.Lock()
        self._metas: dict[str, tuple[SandboxMeta, str]] = {}
        """meta.json of sandboxes as read or written here, with its path: it never changes
        while the sandbox lives, and every command reads it; a hit still checks that the
        file is there (another process, a restarted service's, may have removed it)."""
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        seal_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if os.geteuid() == 0 and mount_root is None:
            for root in reclaim_orphan_roots(self.mount_root.parent, keep=self.mount_root):
                log.warning("reclaimed the sandbox mounts of a gone state dir: %s", root)

    def _ensure_mount_root(self, sandbox_id: str) -> None:
        """Create the mount root on demand (0711 levels: reach your mount, list nothing)."""
        missing = [p for p in [self.mount_root, *self.mount_root.parents] if not p.exists()]
        for p in reversed(missing):
            with contextlib.suppress(FileExistsError):
                p.mkdir(mode=0o711)
                p.chmod(0o711)
        if os.geteuid() == 0:
            check_traversable(sandbox_id, self.mount_root)
        # Only over an empty root: a mount would hide quotas already under it (a previous
        # version's). Without it sandboxes start as before, just slower.
        if self.own_root:
            with contextlib.suppress(FileExistsError):
                self.view_dir.mkdir(mode=0o711)
            if not os.path.ismount(self.mount_root) and not any(self.mount_root.iterdir()):
                mount_root_fs(self.mount_root)
        owner = self.mount_root / OWNER_FILE
        if os.geteuid() == 0 and not owner.exists():
            owner.write_text(str(self.state_dir.resolve()), encoding="utf-8")

    @property
    def view_dir(self) -> Path:
        """An empty host folder, next to the mount root, where a sandbox's private mount
        namespace binds that sandbox's own quota (see _mountview.py)."""
        return self.mount_root.with_name(self.mount_root.name + ".view")

    def root(self, sandbox_id: str) -> Path:
        """The sandbox's state folder."""
        check_sandbox_id(sandbox_id)
        return self.state_dir / sandbox_id

    def mount(self, sandbox_id: str) -> Path:
        """The sandbox's quota filesystem."""
        check_sandbox_id(sandbox_id)
        return self.mount_root / sandbox_id

    def workspace(self, sandbox_id: str) -> Path:
        """Host directory mounted at /workspace."""
        return self.mount(sandbox_id) / "workspace"

    def tmp(self, sandbox_id: str) -> Path:
        """Host directory mounted at /tmp."""
        return self.mount(sandbox_id) / "tmp"

    def shm(self, sandbox_id: str) -> Path:
        """Host directory mounted at /dev/shm (bubblewrap)."""
        return self.mount(sandbox_id) / "shm"

    def prepare(
        self,
        sandbox_id: str,
        backend: Literal["bubblewrap", "docker"],
        spec: SandboxSpec,
        labels: Mapping[str, str],
        uid: int,
        gid: int,
        rootfs: Path | None = None,
    ) -> SandboxMeta:
        """Create the folder, the quota mount and meta.json; SandboxExists if present."""
        root = self.root(sandbox_id)
        try:
            root.mkdir(mode=0o700)
        except FileExistsError as e:
            raise SandboxExists(f"sandbox {sandbox_id}: already exists in {root}") from e
        meta = SandboxMeta(
            sandbox_id=sandbox_id,
            backend=backend,
            labels=dict(labels),
            spec=spec,
            uid=uid,
            gid=gid,
            rootfs=str(rootfs) if rootfs else None,
        )
        try:
            mnt = self.mount(sandbox_id)
            with self._root_lock:
                self._ensure_mount_root(sandbox_id)
                mount_quota(mnt, spec.disk_mb, uid, gid)
            for sub, mode in (("workspace", 0o755), ("tmp", 0o1777), ("shm", 0o1777)):
                (mnt / sub).mkdir()
                os.chmod(mnt / sub, mode)
                if os.geteuid() == 0:
                    os.chown(mnt / sub, uid, gid)
            # Written last and renamed: a folder without meta.json is a half-made sandbox.
            tmp = root / "meta.json.tmp"
            tmp.write_text(meta.model_dump_json())
            tmp.rename(root / "meta.json")
        except BaseException:
            self.remove(sandbox_id)
            raise
        self._metas[sandbox_id] = (meta, str(root / "meta.json"))
        return meta

    def meta(self, sandbox_id: str) -> SandboxMeta:
        """Read meta.json; SandboxNotFound if the sandbox is not live."""
        known = self._metas.get(sandbox_id)
        if known is not None and os.path.isfile(known[1]):
            return known[0]
        path = self.root(sandbox_id) / "meta.json"
        try:
            meta = SandboxMeta.model_validate_json(path.read_bytes())
            self._metas[sandbox_id] = (meta, str(path))
            return meta
        except FileNotFoundError as e:
            self._metas.pop(sandbox_id, None)
            raise SandboxNotFound(f"sandbox {sandbox_id}: not found in {self.state_dir}") from e
        except ValidationError as e:
            raise SandboxError(f"sandbox {sandbox_id}: corrupt {path}") from e

    def ids(self) -> list[str]:
        """Ids of every sandbox folder (complete or half-made)."""
        if not self.state_dir.is_dir():
            return []
        return sorted(p.name for p in self.state_dir.iterdir() if _ID.fullmatch(p.name))

    def info(self, meta: SandboxMeta) -> SandboxInfo:
        """The public handle of a sandbox."""
        return SandboxInfo(
            meta.sandbox_id, meta.backend, dict(meta.labels), self.workspace(meta.sandbox_id)
        )

    def remove(self, sandbox_id: str) -> None:
        """Unmount and delete the sandbox folder (idempotent)."""
        self._metas.pop(sandbox_id, None)
        mnt = self.mount(sandbox_id)
        unmount_quota(mnt)
        shutil.rmtree(mnt, ignore_errors=True)
        shutil.rmtree(self.root(sandbox_id), ignore_errors=True)
        # The last sandbox out removes the (per state dir) mount root; ENOTEMPTY otherwise.
        with self._root_lock:
            if self.own_root:
                unmount_root_fs(self.mount_root)
            with contextlib.suppress(OSError):
                # A root that is a plain folder keeps its owner file: it goes with the root.
                if not os.path.ismount(self.mount_root) and [
                    p.name for p in self.mount_root.iterdir()
                ] == [OWNER_FILE]:
                    (self.mount_root / OWNER_FILE).unlink()
                self.mount_root.rmdir()
                # Only with the root: a live sandbox's next start binds its quota there.
                self.view_dir.rmdir()

    def copy_for_seal(self, sandbox_id: str, caps: SealCaps) -> SealCopy:
        """Measure /workspace against the caps, then copy what fits to a fresh folder."""
        self.meta(sandbox_id)
        ws = self.workspace(sandbox_id)
        plan = plan_seal(ws, caps)
        n = 0
        while True:
            dst = self.seal_dir / f"{sandbox_id}-{n}"
            try:
                return SealCopy(dst, copy_planned(ws, dst, plan))
            except FileExistsError:
                if dst.exists() and n < 100_000:
                    n += 1
                    continue
                raise

    def read_file(self, sandbox_id: str, path: str) -> bytes:
        """Read a workspace file without following symlinks."""
        self.meta(sandbox_id)
        return _fs.read_file(sandbox_id, self.workspace(sandbox_id), path)

    def write_file(self, sandbox_id: str, path: str, data: bytes) -> None:
        """Write a workspace file owned by the sandbox user."""
        m = self.meta(sandbox_id)
        _fs.write_file(sandbox_id, self.workspace(sandbox_id), path, data, (m.uid, m.gid))

    def list_files(self, sandbox_id: str) -> list[FileEntry]:
        """List the workspace."""
        self.meta(sandbox_id)
        return _fs.list_entries(self.workspace(sandbox_id))


class WorkspaceFiles:
    """The file half of a backend: both reach /workspace from the host side, through `dirs`."""

    dirs: HostDirs

    def read_file(self, sandbox_id: str, path: str) -> bytes:
        """Read a regular file under /workspace (host side, no symlink followed)."""
        return self.dirs.read_file(sandbox_id, path)

    def write_file(self, sandbox_id: str, path: str, data: bytes) -> None:
        """Write a file under /workspace, owned by the sandbox's user."""
        self.dirs.write_file(sandbox_id, path, data)

    def list_files(self, sandbox_id: str) -> list[FileEntry]:
        """List /workspace."""
        return self.dirs.list_files(sandbox_id)

    def copy_for_seal(self, sandbox_id: str, caps: SealCaps) -> SealCopy:
        """Copy what of /workspace fits the caps to a host folder that outlives the sandbox."""
        return self.dirs.copy_for_seal(sandbox_id, caps)
