"""Sealing a finished run: plan what of a workspace snapshot goes in, then store it.

The plan reads only metadata (lstat), never contents: symlinks are never followed (a link
to /etc/shadow or to another sandbox is excluded, reason "symlink"); FIFOs, sockets and
devices are excluded as "special file"; caps on file count and bytes turn the overflow
into exclusions. The store step then puts each planned file into the blob store, which
hashes it while copying it in: one read and one hash per file. That is safe because the
snapshot is the manager's own copy, which no sandbox can reach or change after the plan.

Paths in the plan are relative, '/'-separated, decoded with ``os.fsdecode``
(surrogateescape): a non-UTF-8 name round-trips exactly through ``os.fsencode(path)``.
Paths in the seal (FileRef, Exclusion) are ``display_path``'s printable, JSON-safe form.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from assay.store import BlobStore, media_type_of
from assay_schemas import Exclusion, FileRef, SandboxSpec

__all__ = [
    "PlannedFile",
    "Seal",
    "SealPlan",
    "display_path",
    "plan_seal",
    "seal_snapshot",
    "store_plan",
]


class PlannedFile(NamedTuple):
    """A regular file the plan lets into the seal."""

    path: str
    """Relative path (surrogateescape-decoded; os.fsencode gives the exact bytes)."""
    size: int
    media_type: str


class SealPlan(NamedTuple):
    """Files to seal and entries excluded, both in path order."""

    files: list[PlannedFile]
    excluded: list[Exclusion]
    total_bytes: int


class Seal(NamedTuple):
    """What an ArtifactsSealed event records."""

    files: list[FileRef]
    excluded: list[Exclusion]


def display_path(path: str) -> str:
    """Printable, valid-UTF-8 form of a path: undecodable bytes as \\xNN (lossy, for humans)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _entries(dir_fd: int, rel: bytes) -> Iterator[tuple[bytes, os.stat_result | str]]:
    """Every non-directory entry under dir_fd in path order, with its lstat or why not.

    Directories are descended into (opened without following links), not yielded.
    """
    for name in sorted(os.listdir(dir_fd)):
        bname = os.fsencode(name)
        sub = rel + b"/" + bname if rel else bname
        try:
            st = os.stat(bname, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            yield sub, "vanished"
            continue
        if not stat.S_ISDIR(st.st_mode):
            yield sub, st
            continue
        try:
            sub_fd = os.open(bname, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
        except OSError:
            yield sub, "unreadable directory"
            continue
        try:
            yield from _entries(sub_fd, sub)
        finally:
            os.close(sub_fd)


class _Caps(NamedTuple):
    max_files: int
    max_total_bytes: int
    max_file_bytes: int | None


def _exclusion_reason(st: os.stat_result, planned: int, total: int, caps: _Caps) -> str | None:
    """Why an entry stays out of the seal, given what is already in; None if it goes in."""
    if stat.S_ISLNK(st.st_mode):
        return "symlink"
    if not stat.S_ISREG(st.st_mode):
        return "special file"
    if planned >= caps.max_files:
        return "over artifact count cap"
    if caps.max_file_bytes is not None and st.st_size > caps.max_file_bytes:
        return "over artifact file size cap"
    if total + st.st_size > caps.max_total_bytes:
        return "over artifact size cap"
    return None


def _excluded(path: str, reason: str) -> Exclusion:
    return Exclusion(path=display_path(path), reason=reason)


def plan_seal(
    root: Path,
    *,
    max_files: int = 10_000,
    max_total_bytes: int = 1 << 30,
    max_file_bytes: int | None = None,
) -> SealPlan:
    """Walk root (never following symlinks, reading no contents) and decide what to seal."""
    caps = _Caps(max_files, max_total_bytes, max_file_bytes)
    files: list[PlannedFile] = []
    excluded: list[Exclusion] = []
    total = 0
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for rel, st in _entries(fd, b""):
            path = os.fsdecode(rel)
            if isinstance(st, str):
                excluded.append(_excluded(path, st))
            elif reason := _exclusion_reason(st, len(files), total, caps):
                excluded.append(_excluded(path, reason))
            else:
                total += st.st_size
                files.append(PlannedFile(path, st.st_size, media_type_of(display_path(path))))
    finally:
        os.close(fd)
    return SealPlan(files, excluded, total)


def store_plan(root: Path, plan: SealPlan, store: BlobStore) -> Seal:
    """Put every planned file into the store (hashed there, once) and describe the seal."""
    files = []
    for f in plan.files:
        info = store.put_file(root / f.path)
        files.append(
            FileRef(
                path=display_path(f.path),
                sha256=info.sha256,
                size=info.size,
                media_type=f.media_type,
            )
        )
    return Seal(files, list(plan.excluded))


def seal_snapshot(snapshot: Path, store: BlobStore, spec: SandboxSpec) -> Seal:
    """Plan and store a snapshot within the sandbox's caps; the snapshot is removed after."""
    try:
        plan = plan_seal(
            snapshot, max_files=spec.max_artifact_files, max_total_bytes=spec.max_artifact_bytes
        )
        return store_plan(snapshot, plan, store)
    finally:
        shutil.rmtree(snapshot, ignore_errors=True)
