"""Scale runs, measured live: one size's runs on a fresh stack, /proc sampled throughout.

The services run as deployed, one `assay serve` process each (sandbox-manager, runner,
aggregator) on a fresh embedded nats-server. While the runs are live, /proc is sampled:
each service's own CPU time and memory, and each live sandbox's processes (bwrap and the
resident; the agent's commands are left out: the excluded work); nats-server's `/connz`
is read before and after for the messages each service's connection carried.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from pathlib import Path
from typing import NamedTuple

from nats.aio.msg import Msg

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.embedded import NatsServer, find_free_port
from assay.store import LocalBlobStore
from assay_schemas import AgentSpec, parse_event_subject
from bench.load import _Proc, _start_services, _stop, _wait_durables
from bench.model_process import MODEL
from bench.procs import Sampler, stat
from bench.pyspy import profiled
from bench.runner import _campaign, _drafts, log_breaches
from bench.traffic import flows, per_step, read_connz, read_varz

__all__ = ["Size"]

SERVICES = ("sandbox-manager", "runner", "aggregator")
CAMPAIGN = "scale"


class Size(NamedTuple):
    """A workload: runs × tool steps at a concurrency, the model answering after latency_s."""

    runs: int
    steps: int
    concurrency: int
    latency_s: float = 1.0

    @classmethod
    def parse(cls, text: str, latency_s: float = 1.0) -> Size:
        """``RUNSxSTEPS@CONCURRENCY``, e.g. ``1000x10@500``."""
        m = re.fullmatch(r"\s*(\d{1,6})x(\d{1,3})@(\d{1,5})\s*", text)
        if not m or min(int(g) for g in m.groups()) < 1:
            raise ValueError(
                f"scale size {text!r}: expected RUNSxSTEPS@CONCURRENCY, e.g. 1000x10@500"
            )
        return cls(int(m[1]), int(m[2]), int(m[3]), latency_s)

    @property
    def ideal_s(self) -> float:
        """The model's time alone: waves of runs, each (steps + 1) calls (the last submits)."""
        return math.ceil(self.runs / self.concurrency) * (self.steps + 1) * self.latency_s


class _Ends:
    """Runs ended (sealed or failed) on the live subjects, and when the last one did."""

    def __init__(self, runs: int) -> None:
        self.runs = runs
        self.sealed: set[str] = set()
        self.failed: set[str] = set()
        self.done = asyncio.Event()
        self.last = 0.0

    async def on(self, msg: Msg) -> None:
        _, kind, _, run_id = parse_event_subject(msg.subject) or ("", "", "", "")
        (self.failed if kind == "RunFailed" else self.sealed).add(run_id)
        self.last = time.monotonic()
        if len(self.sealed | self.failed) >= self.runs:
            self.done.set()


class _Result(NamedTuple):
    wall_s: float
    sealed: int
    failed: int
    steps: int
    cpu: dict[str, float]
    sampler: Sampler
    nats_rss: float
    events_per_s: float
    max_lag: int
    traffic: dict[str, tuple[float, float]]
    """Each service's messages per step through nats-server: (published, delivered)."""
    go_procs: int
    """nats-server's Go processors (GOMAXPROCS), as it reports them."""
    first_wave_s: float = math.nan
    """When the first wave's last run was requested (its task admitted), after submitting."""
    breaches: tuple[str, ...] = ()
    """The log's invariants broken once every run ended (`assay check`'s, see `_check`)."""


async def _aggregator_seq(bus: Bus) -> tuple[int, int]:
    """The aggregator's acknowledged stream sequence and its pending count."""
    info = await bus.js.consumer_info(bus.stream.name, "aggregator")
    return int(info.ack_floor.stream_seq if info.ack_floor else 0), int(info.num_pending or 0)


async def _assay(
    base: Path, base_url: str, size: Size, timeout_s: float, profile: Path | None
) -> _Result:
    monitor = find_free_port("127.0.0.1")
    with NatsServer(base / "nats", extra_args=("-m", str(monitor))) as server:
        settings = Settings(
            nats_url=server.url,
            home=base,
            state_dir=base / "state",
            instance="scale",
            runner_concurrency=size.concurrency,
            sandbox_concurrency=min(size.concurrency, 64),
        )
        store = LocalBlobStore(settings.blob_dir)
        async with Bus(settings, service="bench-scale") as bus:
            procs = await _start_services(settings, SERVICES)
            try:
                await _wait_durables(
                    bus, procs, ("sandbox-manager-runs", "runner-runs", "aggregator")
                )
                pids = {p.label: p.proc.pid for p in procs}
                spying = profiled(dict(pids), profile) if profile else contextlib.nullcontext()
                if server.process is not None:
                    pids["nats-server"] = server.process.pid
                with spying:
                    return await _measure(
                        bus,
                        store,
                        pids,
                        procs,
                        base_url,
                        size,
                        timeout_s,
                        f"http://127.0.0.1:{monitor}",
                    )
            finally:
                await _stop(procs)


async def _measure(
    bus: Bus,
    store: LocalBlobStore,
    pids: dict[str, int],
    procs: list[_Proc],
    base_url: str,
    size: Size,
    timeout_s: float,
    monitor_url: str,
) -> _Result:
    ends = _Ends(size.runs)
    names = [f"assay-{label}" for label in SERVICES]
    nc = bus.broker.connection
    subs = [
        await nc.subscribe(bus.subjects.event(kind, CAMPAIGN, "*"), cb=ends.on)
        for kind in ("ArtifactsSealed", "RunFailed")
    ]
    steps = 0

    async def on_step(msg: Msg) -> None:
        nonlocal steps
        steps += 1

    subs.append(
        await nc.subscribe(bus.subjects.event("AgentStepLogged", CAMPAIGN, "*"), cb=on_step)
    )
    wave = min(size.runs, size.concurrency)
    requested: set[str] = set()
    first_wave = math.nan

    async def on_request(msg: Msg) -> None:
        nonlocal first_wave
        requested.add(msg.subject)
        if len(requested) == wave and math.isnan(first_wave):
            first_wave = time.monotonic() - t0

    subs.append(
        await nc.subscribe(bus.subjects.event("RunRequested", CAMPAIGN, "*"), cb=on_request)
    )
    await nc.flush()
    sampler = Sampler(pids, pids["sandbox-manager"])
    # The model endpoint's own limit (8 by default) would cap the calls in flight below the
    # runs in flight: a team that raises the one raises the other.
    agent = AgentSpec(
        agent_id="scale", model=MODEL, base_url=base_url, max_concurrency=size.concurrency
    )
    spec = _campaign(CAMPAIGN, [agent], size.steps + 2)
    seq0, _ = await _aggregator_seq(bus)
    traffic0 = flows(await asyncio.to_thread(read_connz, monitor_url), names)
    sampler.start()
    t0 = time.monotonic()
    await submit_campaign(bus, store, spec, _drafts(size.runs, "t"))
    max_lag = 0
    while not ends.done.is_set() and time.monotonic() - t0 < timeout_s:
        for p in procs:
            if p.proc.returncode is not None:
                raise RuntimeError(f"{p.label} exited with {p.proc.returncode}")
        _, pending = await _aggregator_seq(bus)
        max_lag = max(max_lag, pending)
        await asyncio.sleep(1.0)
    end = ends.last or time.monotonic()
    # The aggregator's rate while live: what it acknowledged until the last run ended.
    seq1, _ = await _aggregator_seq(bus)
    live_s = max(1e-9, time.monotonic() - t0)
    cpu = sampler.stop()
    traffic1 = flows(await asyncio.to_thread(read_connz, monitor_url), names)
    varz = await asyncio.to_thread(read_varz, monitor_url)
    for sub in subs:
        await sub.unsubscribe()
    nats = stat(pids.get("nats-server", 0))
    breaches = await _check(bus)
    return _Result(
        end - t0,
        len(ends.sealed),
        len(ends.failed),
        steps,
        cpu,
        sampler,
        nats.rss_mb if nats else float("nan"),
        (seq1 - seq0) / live_s,
        max_lag,
        per_step(traffic0, traffic1, steps),
        int(varz.get("gomaxprocs", 0)),
        first_wave,
        breaches,
    )


async def _check(bus: Bus) -> tuple[str, ...]:
    """`assay check`'s invariants over the whole log, read back once the runs ended: each
    run ended once and says how, no sandbox left without a live run (verdicts still owed
    within the grace are not yet a breach)."""
    return log_breaches([(e.sequence, e.event) async for e in bus.replay()])
