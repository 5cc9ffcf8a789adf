"""Hostile workspaces at sealing: nothing reaches the host before it is measured."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from assay_sandbox_manager.backends import SandboxBackend, SandboxSpec
from assay_sandbox_manager.seal import SealCaps, copy_planned, plan_seal


def _bytes_under(root: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def test_sparse_files_never_reach_the_host(backend: SandboxBackend, spec: SandboxSpec) -> None:
    sid = f"t-{uuid.uuid4().hex[:12]}"
    spec = spec.model_copy(update={"file_size_mb": 1024})  # disk_mb stays 64
    backend.create(spec, sid, {"assay.run_id": sid})
    try:
        res = backend.exec(sid, "for i in 1 2 3 4; do truncate -s 500M /workspace/s$i; done")
        assert res.exit_code == 0, res
        backend.write_file(sid, "ok.txt", b"fine")
        caps = SealCaps(max_files=100, max_total_bytes=10 << 30)  # the size caps allow it
        copy = backend.copy_for_seal(sid, caps)
    finally:
        backend.destroy(sid)
    assert [f.path for f in copy.plan.files] == ["ok.txt"]
    assert {(e.path, e.reason) for e in copy.plan.excluded} == {
        (f"s{i}", "sparse file") for i in range(1, 5)
    }
    assert _bytes_under(copy.path) < 1 << 20


def test_caps_checked_before_copying(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(50):
        (ws / f"f{i:02}").write_bytes(b"x" * 1000)
    (ws / "big").write_bytes(os.urandom(5 << 20))
    plan = plan_seal(ws, SealCaps(max_files=10, max_total_bytes=20_000))
    kept = copy_planned(ws, tmp_path / "snap", plan)
    assert len(kept.files) == 10 and kept.total_bytes == 10_000
    assert ("big", "over artifact size cap") in {(e.path, e.reason) for e in kept.excluded}
    assert sum(e.reason == "over artifact count cap" for e in kept.excluded) == 40
    assert len(list((tmp_path / "snap").iterdir())) == 10  # nothing else was copied


def test_a_file_grown_after_the_plan_is_copied_only_to_its_planned_size(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "log").write_bytes(b"a" * 100)
    (ws / "gone").write_bytes(b"b")
    plan = plan_seal(ws, SealCaps(max_total_bytes=101))
    with open(ws / "log", "ab") as f:  # a process still running keeps writing
        f.write(b"z" * (1 << 20))
    (ws / "gone").unlink()
    (ws / "gone").symlink_to("/etc/shadow")  # and swaps a file for a link
    kept = copy_planned(ws, tmp_path / "snap", plan)
    assert (tmp_path / "snap" / "log").read_bytes() == b"a" * 100
    assert [f.path for f in kept.files] == ["log"]
    assert [(e.path, e.reason) for e in kept.excluded] == [("gone", "changed while sealing")]


def test_deep_and_wide_trees_are_bounded(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    deep = ws
    for _ in range(20):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "bottom").write_text("x")
    for i in range(30):
        (ws / f"w{i:02}").write_text("y")
    plan = plan_seal(ws, SealCaps(max_depth=5, max_entries=25))
    reasons = [e.reason for e in plan.excluded]
    assert reasons[0] == "over directory depth cap"
    assert reasons[-1].startswith("over entry count cap")
    assert len(plan.files) + len(plan.excluded) <= 26
