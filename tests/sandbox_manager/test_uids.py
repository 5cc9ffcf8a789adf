"""The host uid registry: one sandbox per uid, whatever service or state dir asks."""

from __future__ import annotations

import os
import time
import zlib
from pathlib import Path

import pytest

from assay_sandbox_manager.backends._uids import UID_BASE, UID_SPAN, UidRegistry, _own


def test_two_owners_never_share_a_uid(tmp_path: Path) -> None:
    registry = UidRegistry(tmp_path / "uids")
    owner = tmp_path / "state" / "run-1"
    owner.mkdir(parents=True)
    first = registry.claim(owner, "run-1")
    # The same owner path hashes to the same first uid: the second claim must move on.
    second = registry.claim(owner, "run-1")
    assert first != second
    assert all(UID_BASE <= u < UID_BASE + UID_SPAN for u in (first, second))
    assert registry.claimed(first) and registry.claimed(second)


def test_release_gives_back_only_the_owners_claim(tmp_path: Path) -> None:
    registry = UidRegistry(tmp_path / "uids")
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    mine.mkdir()
    theirs.mkdir()
    uid = registry.claim(mine, "mine")
    registry.release(uid, theirs)
    assert registry.claimed(uid)
    registry.release(uid, mine)
    assert not registry.claimed(uid)


def test_release_leaves_a_claim_still_being_made(tmp_path: Path) -> None:
    """Another service between its mkdir and its owner file: a late or repeated release
    of the uid by its previous owner must not take the claim from under it."""
    registry = UidRegistry(tmp_path / "uids")
    previous = tmp_path / "previous"
    previous.mkdir()
    uid = registry.claim(previous, "previous")
    registry.release(uid, previous)
    (registry.folder / str(uid)).mkdir()  # the next claimer's mkdir, no owner yet
    registry.release(uid, previous)
    assert registry.claimed(uid)


def _claim_in_the_way(tmp_path: Path, held_for: str, age_s: float) -> tuple[Path, Path, int]:
    """A new owner folder, and a claim held for held_for (a folder that does not exist) on
    the uid that owner tries first, age_s old: (owner, that claim, its uid)."""
    owner = tmp_path / "new-owner"
    owner.mkdir()
    first_try = UID_BASE + zlib.crc32(os.fsencode(owner)) % UID_SPAN
    claim = tmp_path / "uids" / str(first_try)
    claim.mkdir(parents=True)
    (claim / "owner").write_text(str(tmp_path / held_for))
    then = time.time() - age_s
    os.utime(claim, (then, then))
    return owner, claim, first_try


def test_a_dead_services_claim_is_taken_over(tmp_path: Path) -> None:
    """A claim whose owner folder is gone, older than a minute, whose uid runs nothing."""
    owner, claim, uid = _claim_in_the_way(tmp_path, "a-state-folder-long-gone", 3600)
    assert UidRegistry(tmp_path / "uids").claim(owner, "new") == uid
    assert (claim / "owner").read_text() == str(owner)


def test_a_young_claim_is_not_taken_over(tmp_path: Path) -> None:
    """Younger than a minute, it may be a sandbox between its claim and its folder."""
    owner, claim, uid = _claim_in_the_way(tmp_path, "not-made-yet", 0)
    assert UidRegistry(tmp_path / "uids").claim(owner, "new") != uid
    assert (claim / "owner").read_text() == str(tmp_path / "not-made-yet")


def _ownerless_claim(tmp_path: Path, age_s: float) -> tuple[Path, Path, int]:
    """A claim with no owner file (its service died between mkdir and owner file, or in
    the middle of a release) on the uid a new owner tries first, age_s old."""
    owner, claim, uid = _claim_in_the_way(tmp_path, "unused", age_s)
    (claim / "owner").unlink()
    then = time.time() - age_s
    os.utime(claim, (then, then))
    return owner, claim, uid


def test_an_old_claim_without_an_owner_file_is_taken_over(tmp_path: Path) -> None:
    """Before, such a claim held its uid until the host rebooted."""
    owner, claim, uid = _ownerless_claim(tmp_path, 3600)
    registry = UidRegistry(tmp_path / "uids")
    assert registry.claim(owner, "new") == uid
    assert (claim / "owner").read_text() == str(owner)
    registry.release(uid, owner)
    assert not registry.claimed(uid)


def test_a_young_claim_without_an_owner_file_is_left_alone(tmp_path: Path) -> None:
    """A live service between its mkdir and its owner file."""
    owner, claim, uid = _ownerless_claim(tmp_path, 0)
    assert UidRegistry(tmp_path / "uids").claim(owner, "new") != uid
    assert not (claim / "owner").exists()


def test_a_service_stalled_after_its_mkdir_does_not_share_the_uid(tmp_path: Path) -> None:
    """Its claim taken over meanwhile, its own owner file's exclusive create fails, so it
    moves on to another uid instead of writing over the new owner's."""
    owner, claim, uid = _ownerless_claim(tmp_path, 3600)
    assert UidRegistry(tmp_path / "uids").claim(owner, "new") == uid
    stalled = tmp_path / "stalled"
    with pytest.raises(FileExistsError):
        _own(claim, stalled)
    assert (claim / "owner").read_text() == str(owner)
