"""Load rows: a campaign end to end on separate service processes, scripted models.

A fresh embedded nats-server; `assay serve` processes as deployed (2 runners sharing
`runner-runs`, 2 instances of one LLM judge sharing `judge-<id>`, the sandbox-manager on
bubblewrap, the rule judge, the aggregator); agents and the judge are answered at once by
the scripted model server in this process, through the real OpenAI SDK. Agents are short
(one `bash` step, then submit); the judge lists the sealed files, opens one, and submits
a verdict. While the campaign runs, consumer lag and each process's memory and CPU time
are sampled; latencies come from the events' own timestamps on the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import yaml
from nats.aio.msg import Msg

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.embedded import NatsServer
from assay.store import LocalBlobStore
from assay.tasks import TaskDraft
from assay_schemas import (
    RULES_JUDGE_ID,
    AgentSpec,
    CampaignSpec,
    JudgeSpec,
    JudgmentFailed,
    JudgmentRecorded,
    Limits,
    SandboxSpec,
)
from assay_testing.demo import JudgeTemper, judge_script
from assay_testing.scripted import Script, ScriptedModelServer, ScriptedSequence, ScriptReply

from .procs import Memory, cpu_s, memory
from .procs import self_cpu as own_cpu
from .table import Row, percentile

__all__ = ["bench_load"]

KEY_ENV = "ASSAY_BENCH_SCRIPTED_KEY"
AGENT_MODEL = "load-agent"
JUDGE_MODEL = "load-judge"
JUDGE_ID = "j"
DURABLES = (
    "runner-runs",
    f"judge-{JUDGE_ID}",
    f"judge-{RULES_JUDGE_ID}",
    "sandbox-manager-runs",
    "aggregator",
)
"""The consumers whose lag the benchmark watches: one per service."""
CAMPAIGN = "load"
AGENTS = 10
# (label, `assay serve` arguments); the judge's spec file is appended at start.
PROCESSES = (
    ("sandbox-manager", ("sandbox-manager",)),
    ("runner-1", ("runner",)),
    ("runner-2", ("runner",)),
    ("judge-1", ("judge",)),
    ("judge-2", ("judge",)),
    ("rules", ("rules",)),
    ("aggregator", ("aggregator",)),
)
DURABLES = (
    "sandbox-manager-runs",
    "runner-runs",
    f"judge-{JUDGE_ID}",
    f"judge-{RULES_JUDGE_ID}",
    "aggregator",
)


STAGES = (
    ("RunRequested", "SandboxReady"),
    ("SandboxReady", "AgentFinished"),
    ("AgentFinished", "ArtifactsSealed"),
)


class _Proc(NamedTuple):
    label: str
    proc: asyncio.subprocess.Process


def _env(settings: Settings, instance: str) -> dict[str, str]:
    env = dict(os.environ)
    for name, value in settings.model_dump(exclude_none=True).items():
        env[f"ASSAY_{name.upper()}"] = str(value)
    env["ASSAY_INSTANCE"] = instance
    env.setdefault("OTEL_SDK_DISABLED", "true")
    return env


async def _start_services(
    settings: Settings, services: tuple[str, ...], judge_file: Path | None = None
) -> list[_Proc]:
    """One `assay serve` process per entry of services (a label, or a PROCESSES label)."""
    known = dict(PROCESSES)
    procs = []
    for label in services:
        args = known.get(label, (label,))
        extra = ("--judge", str(judge_file)) if args[0] == "judge" and judge_file else ()
        log = (settings.home / f"{label}.log").open("ab")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "assay_cli",
            "serve",
            *args,
            *extra,
            env=_env(settings, label),
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        procs.append(_Proc(label, proc))
    return procs


async def _stop(procs: list[_Proc]) -> None:
    for p in procs:
        if p.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.proc.pid, signal.SIGTERM)
    for p in procs:
        try:
            await asyncio.wait_for(p.proc.wait(), 20)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.proc.pid, signal.SIGKILL)
            await p.proc.wait()


async def _wait_durables(
    bus: Bus, procs: list[_Proc], durables: tuple[str, ...] = DURABLES, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    missing = list(durables)
    while missing:
        for p in procs:
            if p.proc.returncode is not None:
                raise RuntimeError(f"{p.label} exited with {p.proc.returncode} while starting")
        still = []
        for durable in missing:
            try:
                await bus.js.consumer_info(bus.stream.name, durable)
            except Exception:
                still.append(durable)
        missing = still
        if missing and time.monotonic() > deadline:
            raise TimeoutError(f"durables not created in {timeout}s: {missing}")
        await asyncio.sleep(0.3)


def _campaign(base_url: str, runs: int) -> tuple[CampaignSpec, list[TaskDraft], JudgeSpec]:
    judge = JudgeSpec(
        judge_id=JUDGE_ID, model=JUDGE_MODEL, base_url=base_url, api_key_env=KEY_ENV, family="x"
    )
    agents = [
        AgentSpec(agent_id=f"a{i}", model=AGENT_MODEL, base_url=base_url, api_key_env=KEY_ENV)
        for i in range(AGENTS)
    ]
    spec = CampaignSpec(
        campaign_id=CAMPAIGN,
        agents=agents,
        judges=[judge],
        limits=Limits(max_steps=4, tool_timeout_s=30),
        sandbox=SandboxSpec(memory_mb=1024, exec_timeout_s=30, cpu_seconds=60),
    )
    tasks = max(1, runs // AGENTS)
    drafts = [
        TaskDraft(fields={"task_id": f"t{i:04d}", "prompt": "Compute the answer."}, attachments=[])
        for i in range(tasks)
    ]
    return spec, drafts, judge


class _Watch:
    """Counts finished runs from the live subjects; samples lag, memory and CPU."""

    def __init__(self, procs: list[_Proc], expected: int) -> None:
        self.procs = procs
        self.expected = expected
        self.verdicts: dict[str, set[str]] = defaultdict(set)
        self.done = 0
        self.max_pending: dict[str, int] = defaultdict(int)
        self.max_ack_pending: dict[str, int] = defaultdict(int)
        self.rss_at: dict[str, dict[str, float]] = {}
        """RSS of each process when a quarter of the runs were judged, and at the end."""
        self.cpu_at_start = {p.label: cpu_s(p.proc.pid) for p in procs}

    def on_verdict(self, data: bytes) -> None:
        try:
            body = json.loads(data)
        except ValueError:
            return
        run_id = body.get("run_id")
        if run_id:
            self.verdicts[run_id].add(body.get("judge_id", ""))
            self.done = sum(1 for v in self.verdicts.values() if len(v) >= 2)

    async def sample(self, bus: Bus) -> None:
        for durable in DURABLES:
            with contextlib.suppress(Exception):
                info = await bus.js.consumer_info(bus.stream.name, durable)
                self.max_pending[durable] = max(
                    self.max_pending[durable], int(info.num_pending or 0)
                )
                self.max_ack_pending[durable] = max(
                    self.max_ack_pending[durable], int(info.num_ack_pending or 0)
                )
        if "quarter" not in self.rss_at and self.done >= self.expected // 4:
            self.rss_at["quarter"] = self._rss()

    def _rss(self) -> dict[str, float]:
        out = {}
        for p in self.procs:
            mem = memory(p.proc.pid)
            out[p.label] = mem.rss_mb if mem else float("nan")
        return out


async def _run(base: Path, runs: int, timeout_s: float) -> list[Row]:
    os.environ.setdefault(KEY_ENV, "scripted")
    agent = ScriptedSequence(
        [
            ScriptReply.call("bash", {"command": "echo 42 > result.txt"}),
            ScriptReply.call("submit", {"answer": "The answer is 42; see result.txt."}),
        ]
    )
    scripts: dict[str, Script] = {
        AGENT_MODEL: agent,
        JUDGE_MODEL: judge_script(JudgeTemper(JUDGE_ID, 0)),
    }
    with ScriptedModelServer(scripts) as scripted, NatsServer(base / "nats") as server:
        settings = Settings(
            nats_url=server.url, home=base, state_dir=base / "state", instance="bench"
        )
        spec, drafts, judge = _campaign(scripted.openai_base_url, runs)
        expected = len(drafts) * AGENTS
        judge_file = base / "judge.yaml"
        judge_file.write_text(yaml.safe_dump(judge.model_dump(mode="json")))
        store = LocalBlobStore(settings.blob_dir)
        async with Bus(settings, service="bench-load") as bus:
            procs = await _start_services(settings, tuple(p[0] for p in PROCESSES), judge_file)
            try:
                await _wait_durables(bus, procs)
                watch = _Watch(procs, expected)
                nc = bus.broker.connection

                async def on_verdict(msg: Msg) -> None:
                    watch.on_verdict(msg.data)

                subs = [
                    await nc.subscribe(bus.subjects.event(kind, CAMPAIGN, "*"), cb=on_verdict)
                    for kind in ("JudgmentRecorded", "JudgmentFailed")
                ]
                nats_pid = server.process.pid if server.process is not None else 0
                nats_cpu, self_cpu = cpu_s(nats_pid), own_cpu()
                submitted_at = datetime.now(UTC)
                t0 = time.monotonic()
                await submit_campaign(bus, store, spec, drafts)
                while watch.done < expected and time.monotonic() - t0 < timeout_s:
                    for p in procs:
                        if p.proc.returncode is not None:
                            raise RuntimeError(f"{p.label} exited with {p.proc.returncode}")
                    await watch.sample(bus)
                    await asyncio.sleep(1.0)
                await watch.sample(bus)
                watch.rss_at["end"] = watch._rss()
                peaks = {p.label: memory(p.proc.pid) for p in procs}
                cpu = {p.label: cpu_s(p.proc.pid) - watch.cpu_at_start[p.label] for p in procs}
                cpu["nats-server"] = cpu_s(nats_pid) - nats_cpu
                cpu["bench process (scripted models)"] = own_cpu() - self_cpu
                for sub in subs:
                    await sub.unsubscribe()
            finally:
                await _stop(procs)
            first: dict[str, dict[str, datetime]] = defaultdict(dict)
            last: dict[str, datetime] = {}
            async for e in bus.replay(subject=bus.subjects.event("*", CAMPAIGN)):
                ev = e.event
                if ev.run_id is None:
                    continue
                first[ev.run_id].setdefault(ev.event_type, ev.occurred_at)
                if isinstance(ev, JudgmentRecorded | JudgmentFailed):
                    last[ev.run_id] = max(last.get(ev.run_id, ev.occurred_at), ev.occurred_at)
            requested = {r: t["RunRequested"] for r, t in first.items() if "RunRequested" in t}
    stages: dict[str, list[float]] = defaultdict(list)
    for run_id, seen in first.items():
        for a, b in STAGES:
            if a in seen and b in seen:
                stages[f"{a} → {b}"].append((seen[b] - seen[a]).total_seconds())
        if "ArtifactsSealed" in seen and run_id in last:
            stages["ArtifactsSealed → last judgment"].append(
                (last[run_id] - seen["ArtifactsSealed"]).total_seconds()
            )
    judged = [
        r
        for r in requested
        if r in last and watch.verdicts.get(r, set()) >= {JUDGE_ID, RULES_JUDGE_ID}
    ]
    latencies = [(last[r] - requested[r]).total_seconds() for r in judged]
    end = max((last[r] for r in judged), default=submitted_at)
    wall = (end - submitted_at).total_seconds()
    return _rows(expected, judged, latencies, stages, wall, watch, peaks, cpu)


def _rows(
    expected: int,
    judged: list[str],
    latencies: list[float],
    stages: dict[str, list[float]],
    wall: float,
    watch: _Watch,
    peaks: dict[str, Memory | None],
    cpu: dict[str, float],
) -> list[Row]:
    g = "load"
    n = len(judged)
    label = f"{n} of {expected} runs" if n < expected else f"{n} runs"
    rows = [
        Row(
            g,
            f"throughput, {label} (submit → last JudgmentRecorded)",
            n / wall * 60 if wall else 0.0,
            "runs/min",
        ),
        Row(g, "run latency p50 (RunRequested → last judgment)", percentile(latencies, 50), "s"),
        Row(g, "run latency p95", percentile(latencies, 95), "s"),
    ]
    for stage, xs in stages.items():
        rows.append(
            Row(g, f"  stage {stage} p50", percentile(xs, 50), "s", percentile(xs, 95), "p95")
        )
    for durable in DURABLES:
        rows.append(
            Row(
                g,
                f"max consumer lag {durable} (pending / in flight)",
                float(watch.max_pending[durable]),
                "msgs",
                float(watch.max_ack_pending[durable]),
                "max ack-pending",
            )
        )
    quarter = watch.rss_at.get("quarter", {})
    end = watch.rss_at.get("end", {})
    for label, _ in PROCESSES:
        peak = peaks.get(label)
        rows.append(
            Row(
                g,
                f"RSS {label}: after {n} runs (baseline: after {expected // 4})",
                end.get(label, float("nan")),
                "MiB",
                quarter.get(label),
                "after 1/4 of the runs",
                f"peak {peak.hwm_mb:.0f} MiB" if peak else "",
            )
        )
    for label, seconds in cpu.items():
        name = f"{label} (+ its sandboxes)" if label == "sandbox-manager" else label
        rows.append(Row(g, f"CPU per run: {name}", seconds / max(1, n) * 1000, "ms"))
    total = sum(cpu.values())
    rows.append(
        Row(
            g,
            "CPU per run: all processes",
            total / max(1, n) * 1000,
            "ms",
            (os.cpu_count() or 1) * wall / max(1, n) * 1000,
            "CPU available per run",
        )
    )
    return rows


def bench_load(runs: int = 1000, timeout_s: float = 480.0) -> list[Row]:
    """A campaign of `runs` runs on 2 runners and 2 judge instances as separate processes."""
    with tempfile.TemporaryDirectory(prefix="assay-load-", dir="/var/tmp") as tmp:
        base = Path(tmp)
        base.chmod(0o711)  # sandbox uids must traverse to their workspace mounts
        return asyncio.run(_run(base, runs, timeout_s))
