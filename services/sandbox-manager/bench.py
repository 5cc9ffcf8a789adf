"""Latency benchmark of the sandbox backends (create→ready, exec `true` round trip)."""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import NamedTuple

from .backends import (
    BubblewrapBackend,
    DockerBackend,
    SandboxBackend,
    SandboxBackendUnavailable,
    SandboxSpec,
)
from .runtime import default_rootfs, ensure_image

__all__ = ["BenchRow", "bench_backends"]


class BenchRow(NamedTuple):
    """p50/p95 of one measurement on one backend, in milliseconds."""

    backend: str
    metric: str
    n: int
    p50_ms: float
    p95_ms: float


def _pct(xs: list[float], q: int) -> float:
    if len(xs) < 2:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1]


def _bench_one(backend: SandboxBackend, spec: SandboxSpec, n: int) -> list[BenchRow]:
    create, ex, destroy = [], [], []
    for _ in range(n):
        sid = f"bench-{uuid.uuid4().hex[:12]}"
        t0 = time.perf_counter()
        backend.create(spec, sid, {"assay.bench": "1"})
        create.append((time.perf_counter() - t0) * 1000)
        try:
            t0 = time.perf_counter()
            res = backend.exec(sid, ["true"], timeout_s=30)
            ex.append((time.perf_counter() - t0) * 1000)
            assert res.exit_code == 0, res
        finally:
            t0 = time.perf_counter()
            backend.destroy(sid)
            destroy.append((time.perf_counter() - t0) * 1000)
    return [
        BenchRow(backend.name, metric, n, round(_pct(xs, 50), 2), round(_pct(xs, 95), 2))
        for metric, xs in (("create_ready", create), ("exec_true", ex), ("destroy", destroy))
    ]


def bench_backends(
    n: int = 20, backends: tuple[str, ...] = ("bubblewrap", "docker"), work_dir: Path | None = None
) -> list[BenchRow]:
    """Measure each available backend n times; a backend that cannot start is skipped."""
    rows: list[BenchRow] = []
    with tempfile.TemporaryDirectory(prefix="assay-bench-", dir=work_dir) as tmp:
        base = Path(tmp)
        base.chmod(0o711)  # sandbox uids must traverse to their workspace mounts
        for name in backends:
            try:
                if name == "bubblewrap":
                    be: SandboxBackend = BubblewrapBackend(
                        base / "bw", base / "snap", rootfs=default_rootfs()
                    )
                    spec = SandboxSpec(backend="bubblewrap")
                else:
                    be = DockerBackend(base / "dk", base / "snap")
                    spec = SandboxSpec(backend="docker", image=ensure_image())
            except SandboxBackendUnavailable:
                continue
            rows += _bench_one(be, spec, n)
    return rows


if __name__ == "__main__":
    for row in bench_backends():
        print(row)
