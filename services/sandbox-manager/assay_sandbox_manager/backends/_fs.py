"""Host-side file access to a sandbox workspace that never follows a symlink.

The service runs as root, so a symlink the agent planted (``out -> /etc/shadow``) must
never be followed: every path is walked one component at a time with ``O_NOFOLLOW``
relative to the workspace directory fd.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from ._errors import SandboxLimitExceeded, SandboxPathError
from ._models import FileEntry

__all__ = ["list_entries", "read_file", "split_workspace_path", "write_file"]

WORKSPACE = "/workspace"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def split_workspace_path(sandbox_id: str, path: str) -> list[str]:
    """Return the components of a path relative to /workspace, rejecting escapes."""
    if "\x00" in path:
        raise SandboxPathError(f"sandbox {sandbox_id}: NUL byte in path {path!r}")
    rel = path
    if path.startswith("/"):
        if path != WORKSPACE and not path.startswith(WORKSPACE + "/"):
            raise SandboxPathError(f"sandbox {sandbox_id}: path {path!r} is outside /workspace")
        rel = path[len(WORKSPACE) :]
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SandboxPathError(f"sandbox {sandbox_id}: '..' is not allowed in path {path!r}")
    return parts


def _open_parent(sandbox_id: str, root: Path, parts: list[str], create: bool) -> int:
    """Open the directory holding the last component, walking without following links."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for name in parts[:-1]:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except (NotADirectoryError, OSError) as e:
                raise SandboxPathError(
                    f"sandbox {sandbox_id}: {'/'.join(parts)!r} crosses a symlink or non-directory"
                ) from e
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_file(
    sandbox_id: str, root: Path, path: str, flags: int, *, create: bool
) -> tuple[int, list[str]]:
    """Open a regular file under the workspace root, following no link; fd and path parts."""
    parts = split_workspace_path(sandbox_id, path)
    if not parts:
        raise SandboxPathError(f"sandbox {sandbox_id}: {path!r} is the workspace itself")
    dfd = _open_parent(sandbox_id, root, parts, create=create)
    try:
        # O_NONBLOCK: opening a FIFO must not hang the service.
        fd = os.open(
            parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=dfd
        )
    except OSError as e:
        if isinstance(e, FileNotFoundError) and not create:
            raise SandboxPathError(f"sandbox {sandbox_id}: no file {path!r}") from e
        verb = "write" if create else "open"
        raise SandboxPathError(f"sandbox {sandbox_id}: cannot {verb} {path!r}: {e}") from e
    finally:
        os.close(dfd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SandboxPathError(f"sandbox {sandbox_id}: {path!r} is not a regular file")
    return fd, parts


def read_file(sandbox_id: str, root: Path, path: str, max_bytes: int | None = None) -> bytes:
    """Read a regular file under the workspace root."""
    fd, _ = _open_file(sandbox_id, root, path, os.O_RDONLY, create=False)
    with os.fdopen(fd, "rb") as f:
        data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise SandboxLimitExceeded(f"sandbox {sandbox_id}: {path!r} is over {max_bytes} bytes")
    return data


def write_file(sandbox_id: str, root: Path, path: str, data: bytes, owner: tuple[int, int]) -> None:
    """Write a file under the workspace root, owned by the sandbox user."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd, parts = _open_file(sandbox_id, root, path, flags, create=True)
    try:
        if os.geteuid() == 0:
            os.fchown(fd, *owner)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as e:
        raise SandboxLimitExceeded(f"sandbox {sandbox_id}: writing {path!r} failed: {e}") from e
    finally:
        os.close(fd)
    _chown_dirs(root, parts[:-1], owner)


def _chown_dirs(root: Path, parts: list[str], owner: tuple[int, int]) -> None:
    """Hand directories that write_file created over to the sandbox user."""
    if os.geteuid() != 0:
        return
    cur = root
    for name in parts:
        cur = cur / name
        os.chown(cur, *owner, follow_symlinks=False)


def _walk(root: bytes, rel: bytes) -> Iterator[tuple[bytes, os.DirEntry[bytes]]]:
    with os.scandir(os.path.join(root, rel) if rel else root) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        sub = os.path.join(rel, e.name) if rel else e.name
        yield sub, e
        if e.is_dir(follow_symlinks=False):
            yield from _walk(root, sub)


def list_entries(root: Path) -> list[FileEntry]:
    """Every entry under root, depth first, symlinks listed but never followed."""
    out: list[FileEntry] = []
    for rel, e in _walk(os.fsencode(root), b""):
        st = e.stat(follow_symlinks=False)
        kind: Literal["file", "dir", "symlink", "other"] = "other"
        if stat.S_ISDIR(st.st_mode):
            kind = "dir"
        elif stat.S_ISREG(st.st_mode):
            kind = "file"
        elif stat.S_ISLNK(st.st_mode):
            kind = "symlink"
        out.append(FileEntry(os.fsdecode(rel), kind, st.st_size if kind == "file" else 0))
    return out
