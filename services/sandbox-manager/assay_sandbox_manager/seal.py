"""Sealing a finished run, in three steps: plan, copy, store.

Plan (`plan_seal`): measure a workspace against the seal caps, reading only metadata
(lstat), never contents: symlinks are never followed (a link to /etc/shadow or to another
sandbox is excluded, reason "symlink"); FIFOs, sockets and devices are excluded as
"special file"; sparse files (whose apparent size the agent never wrote: ``truncate -s
500M`` costs the sandbox nothing) are excluded as "sparse file"; caps on file count, file
size and total bytes turn the overflow into exclusions.

Copy (`copy_planned`, run by a backend's `copy_for_seal`): only then is anything copied,
and each copy reads at most the planned size: a file that grows after the plan (a process
still running) cannot make the host hold more than the caps.

Store (`store_copy`): each copied file goes into the blob store, which hashes it while
copying it in: one read and one hash per file. That is safe because the copy is the
manager's own, which no sandbox can reach or change after the plan, and holds no more than
the caps allowed. `seal_fields` makes the ArtifactsSealed fields.

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
from typing import NamedTuple, NotRequired, TypedDict

from assay.store import BlobStore, media_type_of
from assay_schemas import (
    FINAL_MESSAGE_INLINE_CHARS,
    SEAL_INLINE_BYTES,
    AgentFinished,
    Event,
    Exclusion,
    FileRef,
    SandboxSpec,
    SealManifest,
)

__all__ = [
    "PlannedFile",
    "Seal",
    "SealCaps",
    "SealCopy",
    "SealPlan",
    "answer_fields",
    "copy_planned",
    "display_path",
    "plan_seal",
    "seal_fields",
    "store_copy",
    "store_plan",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20
_SPARSE_SLACK = 1 << 20
"""Holes up to this size are tolerated (filesystems allocate lazily); beyond it, sparse."""


class SealCaps(NamedTuple):
    """What one sandbox's seal may hold; checked before any byte is copied."""

    max_files: int = 10_000
    max_total_bytes: int = 1 << 30
    max_file_bytes: int | None = None
    max_depth: int = 64
    """Directories nested deeper are excluded (the walk holds one fd per level)."""
    max_entries: int = 100_000
    """Entries looked at in all; the rest of the tree is excluded unexamined."""

    @classmethod
    def of(cls, spec: SandboxSpec) -> SealCaps:
        """The caps a sandbox spec sets."""
        return cls(
            max_files=spec.max_artifact_files,
            max_total_bytes=spec.max_artifact_bytes,
            max_entries=max(100_000, 10 * spec.max_artifact_files),
        )


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


class SealCopy(NamedTuple):
    """The manager's host copy of the planned files, and the plan that chose them."""

    path: Path
    plan: SealPlan


def display_path(path: str) -> str:
    """Printable, valid-UTF-8 form of a path: undecodable bytes as \\xNN (lossy, for humans)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _entries(
    dir_fd: int, rel: bytes, depth: int, max_depth: int
) -> Iterator[tuple[bytes, os.stat_result | str]]:
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
        if depth >= max_depth:
            yield sub, "over directory depth cap"
            continue
        try:
            sub_fd = os.open(bname, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError:
            yield sub, "unreadable directory"
            continue
        try:
            yield from _entries(sub_fd, sub, depth + 1, max_depth)
        finally:
            os.close(sub_fd)


def _exclusion_reason(st: os.stat_result, planned: int, total: int, caps: SealCaps) -> str | None:
    """Why an entry stays out of the seal, given what is already in; None if it goes in."""
    if stat.S_ISLNK(st.st_mode):
        return "symlink"
    if not stat.S_ISREG(st.st_mode):
        return "special file"
    if st.st_size - st.st_blocks * 512 > _SPARSE_SLACK:
        return "sparse file"
    if planned >= caps.max_files:
        return "over artifact count cap"
    if caps.max_file_bytes is not None and st.st_size > caps.max_file_bytes:
        return "over artifact file size cap"
    if total + st.st_size > caps.max_total_bytes:
        return "over artifact size cap"
    return None


def _excluded(path: str, reason: str) -> Exclusion:
    return Exclusion(path=display_path(path), reason=reason)


def plan_seal(root: Path, caps: SealCaps | None = None) -> SealPlan:
    """Walk root (never following symlinks, reading no contents) and decide what to seal."""
    caps = caps or SealCaps()
    files: list[PlannedFile] = []
    excluded: list[Exclusion] = []
    total = 0
    fd = os.open(root, _DIR_FLAGS)
    try:
        for seen, (rel, st) in enumerate(_entries(fd, b"", 0, caps.max_depth)):
            path = os.fsdecode(rel)
            if seen >= caps.max_entries:
                excluded.append(_excluded(path, "over entry count cap; the rest was not examined"))
                break
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


def _open_under(root_fd: int, rel: bytes) -> int:
    """Open rel under root_fd for reading, every component without following a link."""
    parts = rel.split(b"/")
    fd = os.dup(root_fd)
    try:
        for name in parts[:-1]:
            nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        return os.open(parts[-1], flags, dir_fd=fd)
    finally:
        os.close(fd)


def _copy_bounded(src_fd: int, target: bytes, limit: int) -> None:
    """Copy at most limit bytes of a regular file (it may have grown since the plan)."""
    if not stat.S_ISREG(os.fstat(src_fd).st_mode):
        raise OSError(f"{os.fsdecode(target)} is no longer a regular file")
    with open(target, "xb") as out:
        left = limit
        while left > 0:
            chunk = os.read(src_fd, min(_CHUNK, left))
            if not chunk:
                break
            out.write(chunk)
            left -= len(chunk)


def copy_planned(src: Path, dst: Path, plan: SealPlan) -> SealPlan:
    """Copy the planned files of src to dst (which must not exist), each bounded by its
    planned size; files that vanished or changed kind are moved to the exclusions."""
    bdst = os.fsencode(dst)
    os.mkdir(bdst, 0o700)
    kept: list[PlannedFile] = []
    excluded = list(plan.excluded)
    root_fd = os.open(src, _DIR_FLAGS)
    try:
        for f in plan.files:
            rel = os.fsencode(f.path)
            target = os.path.join(bdst, rel)
            os.makedirs(os.path.dirname(target), 0o700, exist_ok=True)
            try:
                fd = _open_under(root_fd, rel)
                try:
                    _copy_bounded(fd, target, f.size)
                finally:
                    os.close(fd)
            except OSError:
                excluded.append(_excluded(f.path, "changed while sealing"))
                continue
            kept.append(f._replace(size=os.stat(target).st_size))
    finally:
        os.close(root_fd)
    excluded.sort(key=lambda e: e.path)
    return SealPlan(kept, excluded, sum(f.size for f in kept))


class Seal(NamedTuple):
    """What an ArtifactsSealed event records."""

    files: list[FileRef]
    excluded: list[Exclusion]


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


class SealFields(TypedDict):
    """The fields of ArtifactsSealed that describe what was sealed."""

    files: list[FileRef]
    excluded: list[Exclusion]
    manifest: NotRequired[FileRef]
    file_count: NotRequired[int]


def seal_fields(seal: Seal, store: BlobStore) -> SealFields:
    """The ArtifactsSealed fields for a seal: inline when small, else a manifest blob, so
    the event stays small however many files an agent leaves."""
    manifest = SealManifest(files=seal.files, excluded=seal.excluded)
    data = manifest.model_dump_json().encode()
    if len(data) <= SEAL_INLINE_BYTES:
        return SealFields(files=seal.files, excluded=seal.excluded)
    info = store.put_bytes(data)
    ref = FileRef(
        path="seal-manifest.json", sha256=info.sha256, size=info.size, media_type="application/json"
    )
    return SealFields(files=[], excluded=[], manifest=ref, file_count=len(seal.files))


class AnswerFields(TypedDict, total=False):
    """The ArtifactsSealed fields of the run's final answer (none when it did not finish)."""

    final_message: str
    final_message_truncated: bool
    final_message_blob: FileRef | None


def answer_fields(ended: Event, store: BlobStore) -> AnswerFields:
    """The ArtifactsSealed fields of the run's final answer, as the runner bounded it. An
    AgentFinished logged before answers were bounded may inline a long one: bounded here, so
    that the seal still fits one event."""
    if not isinstance(ended, AgentFinished):
        return AnswerFields()
    text, ref = ended.final_message, ended.final_message_blob
    if ref is None and len(text) > FINAL_MESSAGE_INLINE_CHARS:
        info = store.put_bytes(text.encode(errors="replace"))
        ref = FileRef(
            path="final-message.txt", sha256=info.sha256, size=info.size, media_type="text/plain"
        )
    return AnswerFields(
        final_message=text[:FINAL_MESSAGE_INLINE_CHARS],
        final_message_truncated=ref is not None,
        final_message_blob=ref,
    )


def store_copy(copy: SealCopy, store: BlobStore) -> Seal:
    """Store a copy the backend already cut to the caps; the copy is removed after."""
    try:
        return store_plan(copy.path, copy.plan, store)
    finally:
        shutil.rmtree(copy.path, ignore_errors=True)
