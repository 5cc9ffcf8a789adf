"""Aggregate memory and process limits per sandbox, through cgroups where the host has them.

RLIMIT_AS and RLIMIT_NPROC bound one process (or one uid); a cgroup bounds the sandbox's
whole tree. cgroup v2 is used when it is the host's only hierarchy with the memory and pids
controllers; otherwise the v1 ``memory`` and ``pids`` hierarchies (a hybrid host, such as
one whose v2 mount has no controllers). Each sandbox's group sits under the service's own
group, in ``assay/<name>``. ``host_cgroups()`` is None where the service cannot make one
(not root, no such controllers, a read-only cgroupfs): the sandbox then has only rlimits.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["JOIN_FAILED", "CgroupHost", "SandboxCgroups", "host_cgroups"]

_ROOT = Path("/sys/fs/cgroup")
_MB = 1024 * 1024
JOIN_FAILED = 125
"""Exit status of a sandbox start whose process could not join its groups."""
_REMOVE_TRIES, _REMOVE_PAUSE_S = 4, 0.005
_SWEEP_AFTER_S = 60.0


@dataclass(frozen=True)
class SandboxCgroups:
    """The group folders of one sandbox (one on v2; one per controller on v1)."""

    folders: tuple[Path, ...]

    def spawn_args(self, errors: Path) -> list[str]:
        """The start helper's options (deploy/sandbox/spawn.c) that move it into every group,
        as root, before it drops to the sandbox uid.

        If a move fails it exits with JOIN_FAILED and leaves the reason in errors (a
        host-only file: the sandbox's own stderr goes nowhere).
        """
        args = ["--join-errors", str(errors)]
        for folder in self.folders:
            args += ["--join", str(folder / "cgroup.procs")]
        return args

    def kill(self) -> None:
        """SIGKILL every process left in the groups."""
        for folder in self.folders:
            with contextlib.suppress(OSError):
                for pid in (folder / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), signal.SIGKILL)

    def remove(self, tries: int = _REMOVE_TRIES) -> bool:
        """Kill what is left and remove the groups (a group with members cannot go);
        whether they are gone.

        Killed processes leave their groups only once they have exited, which on a busy
        host (hundreds of sandboxes, their namespaces torn down) can take seconds: after a
        few quick tries this returns False rather than hold its thread, and the caller
        tries again later.
        """
        for attempt in range(tries):
            if attempt:
                time.sleep(_REMOVE_PAUSE_S)
            self.kill()
            if self.rmdir():
                return True
        return False

    def rmdir(self) -> bool:
        """Remove the groups that are empty (no kill); whether all are gone."""
        for folder in self.folders:
            with contextlib.suppress(OSError):  # gone already, or still busy
                folder.rmdir()
        return not any(f.exists() for f in self.folders)

    def newest_change(self) -> float:
        """The latest mtime of the groups still there (0 when none is; infinity when one
        cannot be read, so that it never looks old)."""
        times = [0.0]
        for folder in self.folders:
            try:
                times.append(folder.stat().st_mtime)
            except FileNotFoundError:
                continue
            except OSError:
                return math.inf
        return max(times)


@dataclass(frozen=True)
class CgroupHost:
    """Where sandbox groups go on this host, and in which layout."""

    version: int
    parents: dict[str, Path]
    """Controller ("memory", "pids"; "" on v2) -> the folder the sandbox groups go in."""

    def create(self, name: str, memory_mb: int, max_processes: int) -> SandboxCgroups:
        """Make the sandbox's groups with their limits (memory_mb counts the tmpfs too)."""
        folders = []
        try:
            for controller, parent in self.parents.items():
                folder = parent / name
                folder.mkdir(exist_ok=True)
                folders.append(folder)
                for file, value in self._limits(controller, memory_mb, max_processes):
                    with contextlib.suppress(FileNotFoundError):  # no swap accounting
                        (folder / file).write_text(str(value))
        except OSError:
            SandboxCgroups(tuple(folders)).remove()
            raise
        return SandboxCgroups(tuple(folders))

    def sweep(self, owned: Callable[[str], bool], min_age_s: float = _SWEEP_AFTER_S) -> int:
        """Remove the empty groups of sandboxes no one owns (a service that stopped while
        their processes were still exiting); how many went. A group younger than
        min_age_s is left alone: it may be a sandbox's between its uid's claim and start."""
        names = set()
        for parent in self.parents.values():
            with contextlib.suppress(OSError):
                names |= {p.name for p in parent.iterdir() if p.name.startswith("sandbox-")}
        now, gone = time.time(), 0
        for name in sorted(names):
            groups = self.existing(name)
            if now - groups.newest_change() < min_age_s or owned(name):
                continue
            gone += groups.rmdir()  # no kill: a group that holds a process is not stale
        return gone

    def existing(self, name: str) -> SandboxCgroups:
        """The groups of a sandbox made before (for destroy after a restart)."""
        return SandboxCgroups(tuple(p / name for p in self.parents.values()))

    def _limits(self, controller: str, memory_mb: int, pids: int) -> list[tuple[str, int]]:
        if self.version == 2:
            return [("memory.max", memory_mb * _MB), ("memory.swap.max", 0), ("pids.max", pids)]
        if controller == "memory":
            mem = memory_mb * _MB
            return [("memory.limit_in_bytes", mem), ("memory.memsw.limit_in_bytes", mem)]
        return [("pids.max", pids)]


def _own_group(controller: str) -> str:
    """This process's group path in the hierarchy holding controller ("" = v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if (controller == "" and names == "") or controller in names.split(","):
            return path.lstrip("/")
    raise OSError(f"not in a {controller or 'v2'} cgroup")


def _probe(parents: dict[str, Path]) -> bool:
    """True if a group can be made (and removed) under every parent."""
    try:
        for parent in parents.values():
            parent.mkdir(parents=True, exist_ok=True)
            probe = parent / f"probe-{os.getpid()}"
            probe.mkdir(exist_ok=True)
            probe.rmdir()
    except OSError:
        return False
    return True


def _enable_v2(parents: dict[str, Path]) -> bool:
    """On v2, delegate memory and pids down to the assay folder (no-internal-process rule)."""
    folder = parents[""]
    with contextlib.suppress(OSError):
        for level in [*reversed(folder.relative_to(_ROOT).parents), folder.relative_to(_ROOT)]:
            (_ROOT / level / "cgroup.subtree_control").write_text("+memory +pids")
        return True
    return False


@functools.cache
def host_cgroups() -> CgroupHost | None:
    """This host's sandbox cgroup layout, or None where the service cannot make groups."""
    if os.geteuid() != 0:
        return None
    try:
        controllers = (_ROOT / "cgroup.controllers").read_text().split()
    except OSError:
        controllers = []
    try:
        if {"memory", "pids"} <= set(controllers):
            parents = {"": _ROOT / _own_group("") / "assay"}
            ok = _probe(parents) and _enable_v2(parents)
            return CgroupHost(2, parents) if ok else None
        parents = {c: _ROOT / c / _own_group(c) / "assay" for c in ("memory", "pids")}
    except OSError:
        return None
    if not all((_ROOT / c / "cgroup.procs").exists() for c in parents):
        return None
    return CgroupHost(1, parents) if _probe(parents) else None
