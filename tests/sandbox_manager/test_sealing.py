"""Sealing plan over a plain directory (no sandbox needed)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from assay_sandbox_manager.sealing import display_path, plan_seal


def test_files_hashed_and_typed(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "t.csv").write_bytes(b"a,b\n")
    big = os.urandom(3 * 1024 * 1024 + 7)  # larger than one read chunk
    (tmp_path / "big.bin").write_bytes(big)
    plan = plan_seal(tmp_path)
    assert [f.path for f in plan.files] == ["big.bin", "sub/t.csv"]
    assert plan.files[0].sha256 == hashlib.sha256(big).hexdigest()
    assert plan.files[1].media_type == "text/csv"
    assert plan.total_bytes == len(big) + 4 and plan.excluded == []


def test_symlinks_and_special_files_excluded(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    ws = tmp_path / "ws"
    (ws / "to-shadow").symlink_to("/etc/shadow")
    (ws / "to-dir").symlink_to(outside)
    (ws / "dangling").symlink_to("nowhere")
    os.mkfifo(ws / "fifo")
    plan = plan_seal(ws)
    assert plan.files == []
    assert dict(plan.excluded) == {
        "dangling": "symlink",
        "fifo": "special file",
        "to-dir": "symlink",
        "to-shadow": "symlink",
    }


def test_caps_become_exclusions(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}").write_bytes(b"x" * 10)
    plan = plan_seal(tmp_path, max_files=3)
    assert len(plan.files) == 3
    assert [r for _, r in plan.excluded] == ["over artifact count cap"] * 2
    plan = plan_seal(tmp_path, max_total_bytes=25)
    assert len(plan.files) == 2
    assert {r for _, r in plan.excluded} == {"over artifact size cap"}
    plan = plan_seal(tmp_path, max_file_bytes=5)
    assert {r for _, r in plan.excluded} == {"over artifact file size cap"}


def test_weird_names_round_trip(tmp_path: Path) -> None:
    names = [b"with space", b"new\nline", b"caf\xe9", b"\xff\xfe.txt", "ünï.txt".encode()]
    for n in names:
        with open(os.path.join(os.fsencode(tmp_path), n), "wb") as out:
            out.write(n)
    plan = plan_seal(tmp_path)
    assert sorted(os.fsencode(f.path) for f in plan.files) == sorted(names)
    for f in plan.files:
        assert (tmp_path / f.path).read_bytes() == os.fsencode(f.path)
        display_path(f.path).encode("utf-8")  # always printable / JSON-safe
    assert display_path(os.fsdecode(b"caf\xe9")) == "caf\\xe9"
