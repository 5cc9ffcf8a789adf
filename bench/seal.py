"""Seal time (measure, then copy) of a bubblewrap workspace, against a plain `cp -a` of it.

Sealing first walks the tree (sizes, allocated blocks, file count) against the caps and
only then copies; the baseline copies the same tree with no checks, in the same run, so
the rows show what the checks cost.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from assay_sandbox_manager.backends import (
    BubblewrapBackend,
    SandboxBackendUnavailable,
    SandboxSpec,
)
from assay_sandbox_manager.runtime import default_rootfs
from assay_sandbox_manager.seal import SealCaps, plan_seal
from bench.table import Row

__all__ = ["bench_seal"]

_SMALL_FILES = (
    "import os\n"
    "for d in range(100):\n"
    "    os.makedirs(f'/workspace/d{d}', exist_ok=True)\n"
    "    for f in range(100):\n"
    "        with open(f'/workspace/d{d}/f{f}.txt', 'w') as fh:\n"
    "            fh.write('x' * 200)\n"
)
_BIG_WORKSPACE = "for i in 1 2 3 4 5; do head -c 100M /dev/urandom > /workspace/big$i; done"


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def _seal_rows(be: BubblewrapBackend, sid: str, what: str, scratch: Path) -> list[Row]:
    """Best of three: the seal, its measuring walk alone, and `cp -a` of the same tree."""
    ws = be.dirs.workspace(sid)
    caps = SealCaps(max_files=20_000, max_total_bytes=600 << 20)
    seal, walk, copy = [], [], []
    for n in range(3):
        t0 = time.perf_counter()
        plan_seal(ws, caps)
        walk.append(_ms(t0))
        t0 = time.perf_counter()
        snap = be.copy_for_seal(sid, caps)
        seal.append(_ms(t0))
        assert not snap.plan.excluded, snap.plan.excluded[:3]
        shutil.rmtree(snap.path)
        dst = scratch / f"cp-{n}"
        t0 = time.perf_counter()
        subprocess.run(["cp", "-a", str(ws), str(dst)], check=True)
        copy.append(_ms(t0))
        shutil.rmtree(dst)
    base = min(copy)
    return [
        Row("seal", f"bubblewrap seal of {what}", min(seal), "ms", base, "cp -a"),
        Row("seal", f"bubblewrap seal of {what}: checks only", min(walk), "ms", base, "cp -a"),
    ]


def bench_seal() -> list[Row]:
    """Seal of 10k small files and of a 500 MB workspace, each against `cp -a`."""
    spec = SandboxSpec(
        backend="bubblewrap",
        disk_mb=700,
        file_size_mb=128,
        max_artifact_files=20_000,
        max_artifact_bytes=600 << 20,
    )
    with tempfile.TemporaryDirectory(prefix="assay-bench-seal-", dir="/var/tmp") as tmp:
        base = Path(tmp)
        try:
            be = BubblewrapBackend(base / "bw", base / "snap", rootfs=default_rootfs())
        except SandboxBackendUnavailable:
            return []
        rows: list[Row] = []
        for what, fill in (
            ("10k small files", ["python3", "-c", _SMALL_FILES]),
            ("a 500 MB workspace", ["sh", "-c", _BIG_WORKSPACE]),
        ):
            sid = f"bench-seal-{uuid.uuid4().hex[:8]}"
            be.create(spec, sid, {"assay.bench": "1"})
            try:
                res = be.exec(sid, fill, timeout_s=300)
                assert res.exit_code == 0, res
                rows += _seal_rows(be, sid, what, base)
            finally:
                be.destroy(sid)
        return rows
