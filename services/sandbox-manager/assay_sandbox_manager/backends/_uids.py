"""Host uids for sandboxes, unique on the host whatever the service instance or state dir.

A uid is claimed by ``mkdir <registry>/<uid>`` (atomic, so two services never get the same
one) in one registry per host: ``ASSAY_SANDBOX_UIDS`` or ``/run/assay/uids`` (a tmpfs, so a
reboot, which ends every sandbox, also empties it). The claim names its owner (the
sandbox's state folder); a claim whose owner is gone and whose uid runs nothing is stale
(a service that died) and is taken over, and so is one with no owner file at all once it
is as old (a service that died between its mkdir and its owner file, or mid-release).
"""

from __future__ import annotations

import contextlib
import os
import time
import zlib
from pathlib import Path

from ._errors import SandboxError

__all__ = ["UID_BASE", "UidRegistry"]

UID_BASE, UID_SPAN = 200_000, 60_000
_STALE_AFTER_S = 60.0
"""A claim younger than this may be a sandbox between claiming and making its folder."""


def _uid_runs_something(uid: int) -> bool:
    for p in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if p.name.isdigit() and p.stat().st_uid == uid:
                return True
    return False


def _own(claim: Path, owner: Path) -> None:
    """Write the claim's owner file, which must not exist yet (FileExistsError)."""
    fd = os.open(claim / "owner", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(str(owner))


class UidRegistry:
    """Claims and releases host uids for sandboxes (root only: others run as themselves)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or Path(os.environ.get("ASSAY_SANDBOX_UIDS", "/run/assay/uids"))

    def claim(self, owner: Path, sandbox_id: str) -> int:
        """A uid no live sandbox on this host has, recorded as owned by owner."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        start = zlib.crc32(os.fsencode(owner)) % UID_SPAN
        for i in range(UID_SPAN):
            uid = UID_BASE + (start + i) % UID_SPAN
            claim = self.folder / str(uid)
            try:
                claim.mkdir()
            except FileExistsError:
                if not self._take_over_stale(claim, uid, owner):
                    continue
                return uid
            try:
                _own(claim, owner)
            except FileExistsError:
                continue  # stalled past the stale age after the mkdir: taken over since
            return uid
        raise SandboxError(f"sandbox {sandbox_id}: no free host uid")

    def claimed(self, uid: int) -> bool:
        """Whether a sandbox (live, or a dead service's not yet taken over) holds uid."""
        return (self.folder / str(uid)).exists()

    def release(self, uid: int, owner: Path) -> None:
        """Give a uid back, if owner still holds it."""
        claim = self.folder / str(uid)
        try:
            if (claim / "owner").read_text() != str(owner):
                return
        except OSError:
            # Gone already, or another service's claim between its mkdir and its owner
            # file: not provably ours, so not ours to remove.
            return
        with contextlib.suppress(FileNotFoundError):
            (claim / "owner").unlink()
        with contextlib.suppress(OSError):
            claim.rmdir()  # gone already, or taken over in between (not ours any more)

    def _take_over_stale(self, claim: Path, uid: int, owner: Path) -> bool:
        """Re-own, for owner, a claim left by a dead service; False if it may be live."""
        try:
            held_by: Path | None = Path((claim / "owner").read_text())
        except FileNotFoundError:
            held_by = None  # a dead service's mkdir without its owner file, or a live one's
        except OSError:
            return False
        try:
            young = time.time() - claim.stat().st_mtime < _STALE_AFTER_S
        except OSError:
            return False  # just released
        if young or (held_by is not None and held_by.exists()) or _uid_runs_something(uid):
            return False
        # Of two services taking over, one wins: the rename of the dead owner's file, or
        # the exclusive create of the missing one.
        try:
            if held_by is not None:
                (claim / "owner").rename(claim / "owner.stale")
                (claim / "owner.stale").unlink()
            _own(claim, owner)
        except OSError:
            return False
        os.utime(claim)
        return True
