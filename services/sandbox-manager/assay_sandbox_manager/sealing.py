"""Sealing plan: which files of a workspace snapshot get sealed, and which are excluded.

Pure: it reads the snapshot, writes nothing. Symlinks are never followed (a link to
/etc/shadow or to another sandbox is recorded as excluded, reason "symlink"); FIFOs,
sockets and devices are excluded as "special file"; caps on file count and total bytes
turn the overflow into exclusions. Paths are relative, '/'-separated, decoded with
``os.fsdecode`` (surrogateescape): a non-UTF-8 name round-trips exactly through
``os.fsencode(path)``; ``display_path`` gives a printable, JSON-safe form.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import NamedTuple

from assay.store import media_type_of

__all__ = ["Exclusion", "SealPlan", "SealedFile", "display_path", "plan_seal"]

_CHUNK = 1 << 20


class SealedFile(NamedTuple):
    """A regular file to seal."""

    path: str
    """Relative path (surrogateescape-decoded; os.fsencode gives the exact bytes)."""
    sha256: str
    size: int
    media_type: str


class Exclusion(NamedTuple):
    """An entry left out of the seal, and why."""

    path: str
    reason: str


class SealPlan(NamedTuple):
    """Files to seal and entries excluded, both in path order."""

    files: list[SealedFile]
    excluded: list[Exclusion]
    total_bytes: int


def display_path(path: str) -> str:
    """Printable, valid-UTF-8 form of a path: undecodable bytes as \\xNN (lossy, for humans)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _hash(dir_fd: int, name: bytes) -> tuple[str, int] | None:
    """Stream-hash a file opened without following links; None if it is no longer regular."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        h, size = hashlib.sha256(), 0
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def plan_seal(
    root: Path,
    *,
    max_files: int = 10_000,
    max_total_bytes: int = 1 << 30,
    max_file_bytes: int | None = None,
) -> SealPlan:
    """Walk root (never following symlinks) and decide what to seal."""
    files: list[SealedFile] = []
    excluded: list[Exclusion] = []
    total = 0

    def walk(dir_fd: int, rel: bytes) -> None:
        nonlocal total
        for name in sorted(os.listdir(dir_fd)):
            bname = os.fsencode(name)
            sub = rel + b"/" + bname if rel else bname
            path = os.fsdecode(sub)
            try:
                st = os.stat(bname, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                excluded.append(Exclusion(path, "vanished"))
                continue
            if stat.S_ISLNK(st.st_mode):
                excluded.append(Exclusion(path, "symlink"))
            elif stat.S_ISDIR(st.st_mode):
                try:
                    sub_fd = os.open(
                        bname, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd
                    )
                except OSError:
                    excluded.append(Exclusion(path, "unreadable directory"))
                    continue
                try:
                    walk(sub_fd, sub)
                finally:
                    os.close(sub_fd)
            elif not stat.S_ISREG(st.st_mode):
                excluded.append(Exclusion(path, "special file"))
            elif len(files) >= max_files:
                excluded.append(Exclusion(path, "over artifact count cap"))
            elif max_file_bytes is not None and st.st_size > max_file_bytes:
                excluded.append(Exclusion(path, "over artifact file size cap"))
            elif total + st.st_size > max_total_bytes:
                excluded.append(Exclusion(path, "over artifact size cap"))
            else:
                got = _hash(dir_fd, bname)
                if got is None:
                    excluded.append(Exclusion(path, "special file"))
                    continue
                digest, size = got
                total += size
                files.append(SealedFile(path, digest, size, media_type_of(display_path(path))))

    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        walk(fd, b"")
    finally:
        os.close(fd)
    return SealPlan(files, excluded, total)
