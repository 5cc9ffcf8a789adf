"""Host uids for sandboxes, unique on the host whatever the service instance or state dir.

A uid is claimed by ``mkdir <registry>/<uid>`` (atomic, so two services never get the same
one) in one registry per host: ``ASSAY_SANDBOX_UIDS`` or ``/run/assay/uids`` (a tmpfs, so a
reboot, which ends every sandbox, also empties it). The claim names its owner (the
sandbox's state folder); a claim whose owner is gone and whose uid runs nothing is stale
(a service that died) and is taken over.
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
                if not self._take_over_stale(claim, uid):
                    continue
            (claim / "owner").write_text(str(owner))
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
        with contextlib.suppress(FileNotFoundError):
            claim.rmdir()

    def _take_over_stale(self, claim: Path, uid: int) -> bool:
        """Re-own a claim left by a dead service; False if it may be live."""
        try:
            owner = Path((claim / "owner").read_text())
            young = time.time() - claim.stat().st_mtime < _STALE_AFTER_S
        except OSError:
            return False  # being made right now, or just released
        if young or owner.exists() or _uid_runs_something(uid):
            return False
        try:
            # The rename is the lock: of two services taking over, one wins.
            (claim / "owner").rename(claim / "owner.stale")
        except OSError:
            return False
        (claim / "owner.stale").unlink()
        os.utime(claim)
        return True
