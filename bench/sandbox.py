"""Latency benchmark of the sandbox backends (create→ready, exec `true` round trip)."""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from pathlib import Path

from assay_sandbox_manager.backends import (
    BubblewrapBackend,
    DockerBackend,
    SandboxBackend,
    SandboxBackendUnavailable,
    SandboxSpec,
)
from assay_sandbox_manager.runtime import default_rootfs, ensure_image
from bench.table import Row

__all__ = ["bench_backends", "bench_nats_exec", "bench_sandbox"]


def _pct(xs: list[float], q: int) -> float:
    if len(xs) < 2:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1]


def _bench_live(backend: SandboxBackend, spec: SandboxSpec, n: int) -> list[Row]:
    """exec `true` and a Python cell, over and over in one live sandbox (its resident up)."""
    sid = f"bench-{uuid.uuid4().hex[:12]}"
    backend.create(spec, sid, {"assay.bench": "1"})
    try:
        backend.exec(sid, ["true"], timeout_s=30)
        ex, cells = [], []
        for _ in range(n):
            t0 = time.perf_counter()
            backend.exec(sid, ["true"], timeout_s=30)
            ex.append((time.perf_counter() - t0) * 1000)
        kernel = backend.python(sid, "x = 0", timeout_s=60).kernel_id
        for _ in range(n):
            t0 = time.perf_counter()
            res = backend.python(sid, "x += 1", timeout_s=30, kernel_id=kernel)
            cells.append((time.perf_counter() - t0) * 1000)
            assert res.exit_code == 0 and not res.restarted, res
    finally:
        backend.destroy(sid)
    target = {"bubblewrap": "≤ 2 ms", "docker": "≤ 5 ms"}[backend.name]
    name = backend.name
    return [
        Row(
            "sandbox", f"{name} exec(true) in a live sandbox p50", _pct(ex, 50), "ms", target=target
        ),
        Row("sandbox", f"{name} exec(true) in a live sandbox p95", _pct(ex, 95), "ms"),
        Row("sandbox", f"{name} python cell in a live kernel p50", _pct(cells, 50), "ms"),
    ]


def _bench_one(backend: SandboxBackend, spec: SandboxSpec, n: int) -> list[Row]:
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
    target = {"bubblewrap": "p50 < 50 ms", "docker": "p50 < 1000 ms"}[backend.name]
    rows = []
    for metric, xs in (
        ("create→ready", create),
        ("first exec(true), resident start included", ex),
        ("destroy", destroy),
    ):
        rows.append(
            Row(
                "sandbox",
                f"{backend.name} {metric} p50",
                _pct(xs, 50),
                "ms",
                target=target if metric == "create→ready" else "",
            )
        )
        rows.append(Row("sandbox", f"{backend.name} {metric} p95", _pct(xs, 95), "ms"))
    return rows


def bench_backends(
    n: int = 20, backends: tuple[str, ...] = ("bubblewrap", "docker"), work_dir: Path | None = None
) -> list[Row]:
    """Measure each available backend n times; a backend that cannot start is skipped."""
    rows: list[Row] = []
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
            rows += _bench_one(be, spec, n) + _bench_live(be, spec, n * 10)
    return rows


async def _nats_exec(n: int, base: Path) -> list[Row]:
    """The service runs as its own process, as deployed; the direct baseline runs here."""
    import asyncio
    import os
    import signal
    import sys

    from assay.bus import Bus
    from assay.config import Settings
    from assay.embedded import NatsServer
    from assay.sandbox_client import SandboxClient
    from assay_schemas import AgentSpec, Limits, RunHistory, RunRequested, Task

    with NatsServer(base / "nats") as server:
        settings = Settings(
            nats_url=server.url, home=base, state_dir=base / "state", instance="benchnats"
        )
        env = {
            **os.environ,
            **{
                f"ASSAY_{k.upper()}": str(v)
                for k, v in settings.model_dump(exclude_none=True).items()
            },
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "assay_cli",
            "serve",
            "sandbox-manager",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        direct_backend = BubblewrapBackend(base / "bw2", base / "snap2", rootfs=default_rootfs())
        direct_backend.create(SandboxSpec(), "benchdirect", {})
        try:
            async with Bus(settings, service="bench") as bus:
                request = RunRequested(
                    event_id=RunRequested.id_for("benchrun"),
                    campaign_id="bench",
                    run_id="benchrun",
                    task=Task(task_id="t", prompt="p"),
                    agent=AgentSpec(agent_id="a", model="m"),
                    epoch=0,
                    limits=Limits(),
                    sandbox=SandboxSpec(),
                    producer=bus.producer,
                )
                await bus.publish(request)
                ready = None
                for _ in range(600):
                    events = await bus.run_events("bench", "benchrun")
                    ready = RunHistory.fold(events).sandbox
                    if ready is not None:
                        break
                    await asyncio.sleep(0.1)
                assert ready is not None, "the sandbox-manager process never made the sandbox"
                client = SandboxClient(
                    bus=bus, instance=ready.instance, sandbox_id=ready.sandbox_id
                )
                direct, remote = [], []
                for _ in range(n):
                    t0 = time.perf_counter()
                    direct_backend.exec("benchdirect", ["true"], timeout_s=30)
                    direct.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    await client.exec(["true"], timeout_s=30)
                    remote.append((time.perf_counter() - t0) * 1000)
        finally:
            direct_backend.destroy("benchdirect")
            os.killpg(proc.pid, signal.SIGTERM)
            await proc.wait()
            from assay_sandbox_manager.backends import BubblewrapBackend as Cleanup

            leftover = Cleanup(settings.instance_state / "bwrap", settings.instance_state / "seals")
            for info in leftover.list_live():
                leftover.destroy(info.sandbox_id)
    d50, r50 = _pct(direct, 50), _pct(remote, 50)
    return [
        Row(
            "sandbox",
            "exec(true) over NATS p50 (service in its own process)",
            r50,
            "ms",
            d50,
            "direct backend call",
        ),
        Row("sandbox", "NATS exec overhead p50", r50 - d50, "ms", target="< 5 ms"),
    ]


def bench_nats_exec(n: int = 30) -> list[Row]:
    """exec(`true`) through the sandbox-manager over NATS vs a direct backend call."""
    import asyncio

    with tempfile.TemporaryDirectory(prefix="assay-bench-", dir="/var/tmp") as tmp:
        base = Path(tmp)
        base.chmod(0o711)
        return asyncio.run(_nats_exec(n, base))


def bench_sandbox() -> list[Row]:
    """Every sandbox row of `make bench`."""
    return bench_backends(n=20, work_dir=Path("/var/tmp")) + bench_nats_exec()
