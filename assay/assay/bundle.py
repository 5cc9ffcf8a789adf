"""Program bundles: an agent's own code, uploaded with its campaign as one tar blob.

A bundle is a folder or a tar on the submitter's machine. At submit it is checked and
packed again as a plain tar of regular files, folders and inward symlinks only, with
fixed owners, modes and times (so one tree is one blob), then stored content-addressed.
The sandbox-manager checks it again when it unpacks it (the blob store is not trusted
more than the submitter), and binds it read-only at /opt/agent.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path, PurePosixPath

from assay_schemas import InvalidInput

__all__ = [
    "BUNDLE_MOUNT",
    "MAX_BUNDLE_BYTES",
    "MAX_BUNDLE_FILES",
    "BundleRefused",
    "check_members",
    "pack_bundle",
]

BUNDLE_MOUNT = "/opt/agent"
"""Where a sandbox has its program's bundle, read-only (ASSAY_AGENT_DIR inside)."""
MAX_BUNDLE_BYTES = 64 * 1024 * 1024
"""Unpacked size of all files in a bundle."""
MAX_BUNDLE_FILES = 5_000
"""Entries (files, folders, symlinks) in a bundle."""


class BundleRefused(InvalidInput):
    """A bundle is hostile or too big: absolute or `..` paths, outward symlinks, links,
    devices, or over a limit."""


Entry = tuple[str, tarfile.TarInfo, bytes]


def pack_bundle(path: Path) -> bytes:
    """The bundle at path (a folder or a tar) checked and packed as a normalised tar."""
    if path.is_dir() and not path.is_symlink():
        entries = _folder_entries(path)
    elif path.is_file():
        entries = _tar_entries(path)
    else:
        raise BundleRefused(f"bundle {path}: not a folder or a tar file")
    return _pack(path, entries)


def check_members(where: object, members: list[tarfile.TarInfo]) -> None:
    """Refuse a tar whose members could leave the folder it is unpacked in, or over a limit."""
    if len(members) > MAX_BUNDLE_FILES:
        raise BundleRefused(f"bundle {where}: over {MAX_BUNDLE_FILES} entries")
    total = 0
    for m in members:
        name = _relative_name(where, m.name)
        if m.issym():
            _check_symlink(where, name, m.linkname)
        elif m.isreg():
            total += m.size
        elif not m.isdir():
            kind = (
                "a hard link (a file with a second name; copy it instead)"
                if m.islnk()
                else "a device, fifo or other special file"
            )
            raise BundleRefused(f"bundle {where}: {name} is {kind}")
        if total > MAX_BUNDLE_BYTES:
            raise BundleRefused(f"bundle {where}: over {MAX_BUNDLE_BYTES} bytes unpacked")


def _relative_name(where: object, name: str) -> str:
    """A member's name as a clean relative path; absolute and `..` names are refused."""
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or "\\" in name or "\0" in name:
        raise BundleRefused(f"bundle {where}: {name!r} is an absolute path or leaves the bundle")
    clean = str(PurePosixPath(*[part for part in p.parts if part != "."])) if p.parts else "."
    return clean


def _check_symlink(where: object, name: str, target: str) -> None:
    """Only relative targets without `..`: no chain of such links can lead out of the bundle."""
    t = PurePosixPath(target)
    if not target or t.is_absolute() or ".." in t.parts:
        raise BundleRefused(f"bundle {where}: symlink {name} -> {target} points out of the bundle")


def _folder_entries(root: Path) -> list[Entry]:
    """The folder's entries, checked by `check_members` as a tar's are, files read after."""
    found: list[tuple[Path, tarfile.TarInfo]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(dirnames) + sorted(filenames):
            full = Path(dirpath) / name
            found.append((full, _info(full, full.relative_to(root).as_posix())))
            if len(found) > MAX_BUNDLE_FILES:  # enough for check_members to refuse
                break
        if len(found) > MAX_BUNDLE_FILES:
            break
    check_members(root, [info for _, info in found])
    return [
        (info.name, info, _read(root, full, info) if info.isreg() else b"") for full, info in found
    ]


def _info(full: Path, name: str) -> tarfile.TarInfo:
    """A tar header for one file of a folder, so that `check_members` judges a folder by
    the tar it would be: a file with a second name (hard link, wherever the other name is)
    becomes LNKTYPE, specials FIFOTYPE, both refused there."""
    st = full.lstat()
    info = tarfile.TarInfo(name)
    if stat.S_ISLNK(st.st_mode):
        info.type, info.linkname = tarfile.SYMTYPE, os.readlink(full)
    elif stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
    elif stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        info.type = tarfile.LNKTYPE
    elif stat.S_ISREG(st.st_mode):
        info.size, info.mode = st.st_size, st.st_mode
    else:
        info.type = tarfile.FIFOTYPE
    return info


def _read(root: Path, full: Path, info: tarfile.TarInfo) -> bytes:
    """A checked file's bytes, opened without following a link and checked again on the
    open descriptor: a file swapped for a link or a hard link after the walk is refused."""
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise BundleRefused(f"bundle {root}: {info.name} changed while read: {e}") from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise BundleRefused(f"bundle {root}: {info.name} changed while read")
        data = f.read(info.size + 1)
    if len(data) != info.size:
        raise BundleRefused(f"bundle {root}: {info.name} changed size while read")
    return data


def _tar_entries(path: Path) -> list[Entry]:
    try:
        with tarfile.open(path) as tar:
            members = tar.getmembers()
            check_members(path, members)
            out = []
            for m in members:
                data = b""
                if m.isreg():
                    f = tar.extractfile(m)
                    data = f.read() if f is not None else b""
                out.append((_relative_name(path, m.name), m, data))
            return out
    except (tarfile.TarError, EOFError, OSError) as e:
        raise BundleRefused(f"bundle {path}: not a readable tar: {e}") from e


def _pack(where: Path, entries: list[Entry]) -> bytes:
    """A tar with fixed owners, times and modes, entries in name order, no duplicates."""
    seen: dict[str, tuple[tarfile.TarInfo, bytes]] = {}
    for name, info, data in entries:
        if name != ".":
            seen[name] = (info, data)
    if not any(info.isreg() for info, _ in seen.values()):
        raise BundleRefused(f"bundle {where}: holds no file")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(seen):
            info, data = seen[name]
            out = tarfile.TarInfo(name)
            out.uid = out.gid = 0
            out.uname = out.gname = ""
            out.mtime = 0
            if info.issym():
                out.type, out.linkname, out.mode = tarfile.SYMTYPE, info.linkname, 0o777
            elif info.isdir():
                out.type, out.mode = tarfile.DIRTYPE, 0o755
            else:
                out.mode = 0o755 if info.mode & 0o111 else 0o644
                out.size = len(data)
            tar.addfile(out, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()
