"""Program bundles: a hostile or oversized bundle is refused at submit with a clear error,
nothing is published; a good one is one content-addressed blob whatever its packing."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from assay import bundle
from assay.bundle import BundleRefused, pack_bundle
from assay.bus import Bus
from assay.campaign import load_campaign, store_bundles, submit_campaign
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_schemas import AgentSpec, CampaignSpec, ProgramSpec

GOOD = {"agent.py": b"print('hi')\n", "lib/util.py": b"X = 1\n"}


def _tar(path: Path, *members: tuple[tarfile.TarInfo, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def _folder(root: Path) -> Path:
    for name, data in GOOD.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


TAR_ATTACKS: dict[str, tuple[list[tuple[tarfile.TarInfo, bytes]], str]] = {
    "absolute path": ([(_member("/etc/cron.d/evil"), b"x")], "absolute path"),
    "dot-dot path": ([(_member("lib/../../escape.py"), b"x")], "leaves the bundle"),
    "absolute symlink": ([(_member("pw", tarfile.SYMTYPE, "/etc/passwd"), b"")], "points out"),
    "dot-dot symlink": ([(_member("up", tarfile.SYMTYPE, "lib/../.."), b"")], "points out"),
    "hard link": ([(_member("a.py"), b"x"), (_member("h", tarfile.LNKTYPE, "a.py"), b"")], "hard"),
    "char device": ([(_member("null", tarfile.CHRTYPE), b"")], "device"),
    "block device": ([(_member("sda", tarfile.BLKTYPE), b"")], "device"),
    "fifo": ([(_member("pipe", tarfile.FIFOTYPE), b"")], "fifo"),
}


@pytest.mark.parametrize("attack", sorted(TAR_ATTACKS))
def test_a_hostile_tar_is_refused(tmp_path: Path, attack: str) -> None:
    members, reason = TAR_ATTACKS[attack]
    path = _tar(tmp_path / "agent.tar", (_member("agent.py"), b"ok"), *members)
    with pytest.raises(BundleRefused, match=reason):
        pack_bundle(path)


FOLDER_ATTACKS: dict[str, tuple[Callable[[Path], None], str]] = {
    "symlink out": (lambda d: os.symlink("/etc", d / "etc"), "points out"),
    "relative symlink out": (lambda d: os.symlink("../../..", d / "lib" / "up"), "points out"),
    "fifo": (lambda d: os.mkfifo(d / "pipe"), "fifo"),
    # A tar refuses hard links; a folder's file with a second name is one too, wherever
    # the other name is (outside: the submitter's secret; inside: the same rule).
    "hard link out": (lambda d: os.link(_outside(d), d / "stolen"), "stolen is a hard link"),
    "hard link in a subfolder": (
        lambda d: os.link(_outside(d), d / "lib" / "stolen"),
        "lib/stolen is a hard link",
    ),
    "hard link inside": (lambda d: os.link(d / "agent.py", d / "again.py"), "is a hard link"),
    "too many files": (
        lambda d: [(d / f"f{i}").touch() for i in range(bundle.MAX_BUNDLE_FILES)],
        "entries",
    ),
    "too big": (
        lambda d: os.truncate(_touch(d / "big.bin"), bundle.MAX_BUNDLE_BYTES + 1),
        "bytes unpacked",
    ),
}


def _outside(d: Path) -> Path:
    secret = d.parent / "secret.txt"
    secret.write_text("host secret")
    return secret


def _touch(path: Path) -> Path:
    path.touch()
    return path


@pytest.mark.parametrize("attack", sorted(FOLDER_ATTACKS))
def test_a_hostile_folder_is_refused(tmp_path: Path, attack: str) -> None:
    make, reason = FOLDER_ATTACKS[attack]
    root = _folder(tmp_path / "agent")
    make(root)
    with pytest.raises(BundleRefused, match=reason):
        pack_bundle(root)


def test_limits_hold_for_tars_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _tar(tmp_path / "a.tar", *[(_member(f"f{i}.py"), b"0123456789") for i in range(5)])
    monkeypatch.setattr(bundle, "MAX_BUNDLE_BYTES", 40)
    with pytest.raises(BundleRefused, match="bytes unpacked"):
        pack_bundle(path)
    monkeypatch.setattr(bundle, "MAX_BUNDLE_BYTES", 10_000)
    monkeypatch.setattr(bundle, "MAX_BUNDLE_FILES", 4)
    with pytest.raises(BundleRefused, match="entries"):
        pack_bundle(path)


def test_not_a_tar_nor_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "junk.tar").write_bytes(b"\x00garbage" * 100)
    for bad in (tmp_path / "junk.tar", tmp_path / "missing"):
        with pytest.raises(BundleRefused):
            pack_bundle(bad)


def test_a_folder_and_its_tar_are_one_blob(tmp_path: Path) -> None:
    root = _folder(tmp_path / "agent")
    os.symlink("lib/util.py", root / "util.py")  # an inward symlink is kept
    (root / "agent.py").chmod(0o700)
    with tarfile.open(tmp_path / "agent.tgz", "w:gz") as tar:
        tar.add(root, arcname=".")
    packed = pack_bundle(root)
    assert packed == pack_bundle(tmp_path / "agent.tgz")
    with tarfile.open(fileobj=io.BytesIO(packed)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert set(members) == {"agent.py", "lib", "lib/util.py", "util.py"}
    assert members["util.py"].linkname == "lib/util.py"
    assert (members["agent.py"].mode, members["lib/util.py"].mode) == (0o755, 0o644)
    assert {(m.uid, m.mtime) for m in members.values()} == {(0, 0)}


async def test_a_hostile_bundle_publishes_nothing(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    root = _folder(tmp_path / "agent")
    os.symlink("/root/.ssh", root / "keys")
    program = ProgramSpec(command=["python3", "/opt/agent/agent.py"], bundle=str(root))
    agent = AgentSpec(agent_id="mine", model="m", kind="program", program=program)
    spec = CampaignSpec(campaign_id="c1", agents=[agent])
    with pytest.raises(BundleRefused, match=r"keys -> /root/\.ssh points out"):
        await submit_campaign(bus, LocalBlobStore(settings.blob_dir), spec, [])
    assert [e async for e in bus.replay()] == []


def test_campaign_file_bundle_is_relative_and_stored_by_hash(tmp_path: Path) -> None:
    _folder(tmp_path / "my-agent")
    (tmp_path / "campaign.yaml").write_text(
        "campaign_id: c1\n"
        "agents:\n"
        "  - agent_id: mine\n"
        "    model: m\n"
        "    kind: program\n"
        "    program: {command: [python3, /opt/agent/agent.py], bundle: my-agent}\n"
    )
    spec = load_campaign(tmp_path / "campaign.yaml")
    store = LocalBlobStore(tmp_path / "blobs")
    stored = store_bundles(store, spec)
    program = stored.agents[0].program
    assert program is not None and program.bundle is None and program.bundle_sha256
    assert store.get_bytes(program.bundle_sha256) == pack_bundle(tmp_path / "my-agent")
    # Named by hash, a bundle must already be stored.
    unknown = program.model_copy(update={"bundle_sha256": "0" * 64})
    bad = stored.model_copy(
        update={"agents": [stored.agents[0].model_copy(update={"program": unknown})]}
    )
    with pytest.raises(BundleRefused, match="not in the blob store"):
        store_bundles(store, bad)


def test_a_stored_hostile_bundle_is_refused_when_unpacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox-manager checks again: a blob put in the store behind submit's back."""
    from assay_sandbox_manager.bundles import ensure_bundle

    monkeypatch.setenv("ASSAY_SANDBOX_CACHE", str(tmp_path / "cache"))
    store = LocalBlobStore(tmp_path / "blobs")
    evil = _tar(tmp_path / "evil.tar", (_member("../../../tmp/pwned"), b"x")).read_bytes()
    sha = store.put_bytes(evil).sha256
    with pytest.raises(BundleRefused, match="leaves the bundle"):
        ensure_bundle(store, sha)
    assert not (tmp_path / "cache" / f"bundle-{sha}").exists()
    good = store.put_bytes(pack_bundle(_folder(tmp_path / "agent"))).sha256
    tree = ensure_bundle(store, good)
    assert (tree / "lib" / "util.py").read_bytes() == b"X = 1\n"
