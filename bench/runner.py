"""Runner rows: orchestration overhead per agent step, and runs per minute on bubblewrap.

A fresh embedded nats-server, the real sandbox-manager (bubblewrap) and the real runner
run in this process; agents are answered at once through the real OpenAI SDK by the
scripted model server, in a process of its own as a deployment's model is
(`bench.model_process`). The model provider and the sandbox backend are wrapped to time each model
call and each command the sandbox really runs, so a step's interval on the log (between
consecutive `AgentStepLogged`) splits into model call + tool run + what the platform adds
around them (the exec RPC over NATS, event build, bookkeeping, and whatever of the step's
publish with PubAck the next model call, which runs meanwhile, does not hide). Baselines
come from the same run: the same model call through the SDK alone and the same command
run directly on the backend.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from nats.aio.msg import Msg

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.embedded import NatsServer
from assay.providers import (
    AdaptiveLimiter,
    AssistantMessage,
    GenerationParams,
    Message,
    ModelProvider,
    RetryPolicy,
    ToolCall,
    ToolResultMessage,
    provider_for,
)
from assay.store import LocalBlobStore
from assay.tasks import TaskDraft
from assay_aggregator.invariants import check_log
from assay_runner.conversation import initial_messages
from assay_runner.tools import TOOLS
from assay_sandbox_manager.backends import SandboxSpec as BackendSpec
from assay_schemas import (
    AgentFinished,
    AgentSpec,
    AgentStepLogged,
    CampaignSpec,
    Event,
    Limits,
    RunFailed,
    RunRequested,
    SandboxReady,
    SandboxSpec,
    Task,
)
from bench.model_process import MODEL, scripted_process
from bench.table import Row, percentile
from bench.timing import TimedProvider, timed_backend

__all__ = ["bench_overhead", "bench_runner", "bench_throughput", "log_breaches"]

KEY_ENV = "ASSAY_BENCH_SCRIPTED_KEY"


def _provider(agent: AgentSpec, limiter: AdaptiveLimiter) -> ModelProvider:
    keyed = agent.model_copy(update={"api_key_env": KEY_ENV})
    return provider_for(keyed, retry=RetryPolicy.for_tests(max_attempts=3), limiter=limiter)


def _drafts(n: int, prefix: str) -> list[TaskDraft]:
    return [
        TaskDraft(
            fields={"task_id": f"{prefix}{i:04d}", "prompt": "Run the check."}, attachments=[]
        )
        for i in range(n)
    ]


def _campaign(campaign_id: str, agents: list[AgentSpec], max_steps: int) -> CampaignSpec:
    return CampaignSpec(
        campaign_id=campaign_id,
        agents=agents,
        limits=Limits(max_steps=max_steps, tool_timeout_s=30),
        sandbox=SandboxSpec(memory_mb=1024, exec_timeout_s=30, cpu_seconds=60),
    )


async def _until_ended(
    bus: Bus, campaign_id: str, runs: int, listening: asyncio.Event, timeout: float
) -> None:
    """Wait, on the live subjects, until `runs` runs are sealed or failed."""
    ended: set[str] = set()
    done = asyncio.Event()

    async def on_end(msg: Msg) -> None:
        ended.add(msg.subject.rsplit(".", 1)[1])
        if len(ended) >= runs:
            done.set()

    nc = bus.broker.connection
    subs = [
        await nc.subscribe(bus.subjects.event(kind, campaign_id, "*"), cb=on_end)
        for kind in ("ArtifactsSealed", "RunFailed")
    ]
    await nc.flush()
    listening.set()
    try:
        await asyncio.wait_for(done.wait(), timeout)
    finally:
        for sub in subs:
            await sub.unsubscribe()


class Ended(NamedTuple):
    """A campaign run to its end: its events, and the wall from its submit to its last
    run's end, and the log's invariants its events break (`assay check`'s)."""

    events: list[Event]
    wall_s: float
    breaches: tuple[str, ...] = ()


async def _submit_and_wait(
    stack: _Stack, spec: CampaignSpec, drafts: list[TaskDraft], timeout: float
) -> Ended:
    """Submit the campaign, wait until each of its runs is sealed or failed.

    Listens on the two end subjects from before the submit, rather than reading the log
    again and again: a replay of every event so far, twice a second, ran in the loop the
    measured runner and sandbox-manager share, and lengthened the steps it landed in."""
    listening = asyncio.Event()
    runs = len(drafts) * len(spec.agents) * spec.epochs
    ended = asyncio.create_task(_until_ended(stack.bus, spec.campaign_id, runs, listening, timeout))
    await listening.wait()
    t0 = time.perf_counter()
    await submit_campaign(stack.bus, stack.store, spec, drafts)
    try:
        await ended
    except TimeoutError as e:
        raise TimeoutError(f"campaign {spec.campaign_id}: runs not all ended in {timeout}s") from e
    wall = time.perf_counter() - t0
    subject = stack.bus.subjects.event("*", spec.campaign_id, "*")
    logged = [(e.sequence, e.event) async for e in stack.bus.replay(subject=subject)]
    return Ended([event for _, event in logged], wall, log_breaches(logged))


def log_breaches(logged: list[tuple[int, Event]]) -> tuple[str, ...]:
    """`assay check`'s invariants over `logged` (sequence, event) as of now, each breach
    named for the bench's row."""
    _, broken = check_log(logged, now=datetime.now(UTC))
    return tuple(f"{b.kind} {b.run_id}: {b.detail}" for b in broken)


class _Stack:
    """nats-server + sandbox-manager + runner in this process, on a private state dir."""

    def __init__(
        self, base: Path, server: NatsServer, concurrency: int, *, max_live: int | None = None
    ) -> None:
        self.settings = Settings(
            nats_url=server.url, home=base, state_dir=base / "state", instance="bench"
        )
        if max_live is not None:
            self.settings = self.settings.model_copy(update={"sandbox_max_live": max_live})
        self.store = LocalBlobStore(base / "blobs")
        self.concurrency = concurrency
        self.execs: dict[str, list[float]] = defaultdict(list)
        self.model_calls: dict[str, list[float]] = {}
        self.limiter = AdaptiveLimiter(64)
        self.made: list[TimedProvider] = []

    def providers(self, agent: AgentSpec) -> ModelProvider:
        # The runner makes one provider per run and never closes it; closed here at the end.
        provider = TimedProvider(inner=_provider(agent, self.limiter), calls=self.model_calls)
        self.made.append(provider)
        return provider

    async def __aenter__(self) -> _Stack:
        from assay_runner.service import build as build_runner
        from assay_sandbox_manager.backends import BubblewrapBackend
        from assay_sandbox_manager.runtime import default_rootfs
        from assay_sandbox_manager.service import build as build_sandbox

        state = self.settings.instance_state
        self.backend = timed_backend(
            BubblewrapBackend(state / "bwrap", state / "seals", rootfs=default_rootfs()),
            self.execs,
        )
        self.sm = build_sandbox(
            self.settings, store=self.store, backends={"bubblewrap": self.backend}
        )
        await self.sm.start()
        self.runner = build_runner(
            self.settings, store=self.store, providers=self.providers, concurrency=self.concurrency
        )
        await self.runner.start()
        self.bus = Bus(self.settings, service="bench")
        await self.bus.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.bus.stop()
        await self.runner.stop()
        await self.sm.stop()
        for provider in self.made:
            await provider.aclose()
        for info in self.backend.list_live():
            self.backend.destroy(info.sandbox_id)


# --- (a) overhead per step -------------------------------------------------------------------


def _conversation(command: str, turns: int) -> list[Message]:
    """A run's conversation after `turns` tool steps, as the runner sends it."""
    task = Task(task_id="t0000", prompt="Run the check.")
    request = RunRequested.model_construct(task=task, agent=AgentSpec(agent_id="a", model=MODEL))  # type: ignore[call-arg]
    messages = initial_messages(request)
    for i in range(turns):
        call = ToolCall(id=f"c{i}", name="bash", arguments=json.dumps({"command": command}))
        messages.append(AssistantMessage(text=None, tool_calls=(call,)))
        messages.append(
            ToolResultMessage(
                call_id=f"c{i}", content="exit code: 0\n--- stdout ---\n\n--- stderr ---\n"
            )
        )
    return messages


async def _baselines(
    stack: _Stack, base_url: str, command: str, n: int
) -> tuple[list[float], list[float]]:
    """A step's floor, `n` times: the same model call through the SDK alone, then the same
    command on the backend directly, in turn as a step makes them (timed apart).

    Each made `n` times back to back instead, their p50s summed to 0.08-0.71 ms (median
    0.21) less than in turn (five runs, docs/scale.md): a floor no agent loop reaches, as
    the call and the command each found the caches warm from itself."""
    provider = _provider(AgentSpec(agent_id="a", model=MODEL, base_url=base_url), stack.limiter)
    params = GenerationParams(max_tokens=4096)
    model: list[float] = []
    direct: list[float] = []
    await asyncio.to_thread(stack.backend.create, BackendSpec(), "benchdirect", {})
    try:  # the first exec starts the sandbox's resident: measured in bench_sandbox
        await asyncio.to_thread(stack.backend.exec, "benchdirect", ["true"], timeout_s=30)
        for i in range(n):
            messages = _conversation(command, i % 10)
            t0 = time.perf_counter()
            await provider.complete(messages, TOOLS, params)
            model.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            await asyncio.to_thread(
                stack.backend.exec, "benchdirect", command, timeout_s=30, cwd="/workspace"
            )
            direct.append((time.perf_counter() - t0) * 1000)
    finally:
        await provider.aclose()
        await asyncio.to_thread(stack.backend.destroy, "benchdirect")
    return model, direct


class _StepSplit(NamedTuple):
    interval: list[float]
    model: list[float]
    tool: list[float]
    sandbox: list[float]
    overhead: list[float]
    """interval − model call − command run in the sandbox (RPC counted as overhead)."""
    runner_only: list[float]
    """interval − model call − tool duration as the runner logs it (RPC excluded)."""


def _split(events: list[Event], stack: _Stack) -> _StepSplit:
    split = _StepSplit([], [], [], [], [], [])
    sandbox_of = {e.run_id: e.sandbox_id for e in events if isinstance(e, SandboxReady)}
    by_run: dict[str, list[AgentStepLogged]] = defaultdict(list)
    for e in events:
        if isinstance(e, AgentStepLogged) and e.run_id is not None:
            by_run[e.run_id].append(e)
    for run_id, steps in by_run.items():
        steps.sort(key=lambda s: s.step)
        task_id = steps[0].task_id or "?"
        model = stack.model_calls.get(task_id, [])
        execs = stack.execs.get(sandbox_of.get(run_id, ""), [])
        if len(model) != len(steps):
            continue  # a retried model call would shift the pairing; leave the run out
        exec_iter = iter(execs)
        sandbox_ms = [
            sum(next(exec_iter, 0.0) for c in s.tool_calls if c.name == "bash") for s in steps
        ]
        for prev, cur in itertools.pairwise(steps):
            i = cur.step
            interval = (cur.occurred_at - prev.occurred_at).total_seconds() * 1000
            tool = sum(r.duration_ms for r in cur.tool_results)
            split.interval.append(interval)
            split.model.append(model[i])
            split.tool.append(tool)
            split.sandbox.append(sandbox_ms[i])
            split.overhead.append(interval - model[i] - sandbox_ms[i])
            split.runner_only.append(interval - model[i] - tool)
    return split


def _run_gaps(events: list[Event]) -> list[float]:
    """Milliseconds from each run's AgentFinished to the next run's first model call, at
    concurrency 1: a run's fixed work between two runs' steps (its seal, teardown, the next
    sandbox, the next run's history read and claim), as far as it stays on the path."""
    ends = sorted(e.occurred_at for e in events if isinstance(e, AgentFinished))
    starts = sorted(
        e.occurred_at - timedelta(milliseconds=e.latency_ms)
        for e in events
        if isinstance(e, AgentStepLogged) and e.step == 0
    )
    return [
        (nxt - end).total_seconds() * 1000
        for end in ends
        if (nxt := next((s for s in starts if s > end), None)) is not None
    ]


async def _no_pool_gaps(base: Path, tool_steps: int, command: str, runs: int) -> list[float]:
    """The run gaps with every sandbox made on demand: `sandbox_max_live` 1, so the next
    run's sandbox is made only once the last one is sealed and destroyed (no warm pool)."""
    home = base / "nopool"
    home.mkdir()
    home.chmod(0o711)  # sandbox uids must traverse to their workspace mounts
    with (
        scripted_process(tool_steps, command=command) as model_url,
        NatsServer(base / "nats-nopool") as server,
    ):
        async with _Stack(home, server, concurrency=1, max_live=1) as stack:
            agent = AgentSpec(agent_id="steps", model=MODEL, base_url=model_url)
            await _run_campaign(stack, "warm", agent, 2, tool_steps + 2, 120, prefix="w")
            events = await _run_campaign(stack, "gaps", agent, runs, tool_steps + 2, 180)
    return _run_gaps(events)


async def _run_campaign(
    stack: _Stack,
    campaign_id: str,
    agent: AgentSpec,
    runs: int,
    max_steps: int,
    timeout: float,
    prefix: str = "t",
) -> list[Event]:
    """Submit `runs` tasks for one agent and wait until every run is done; the events."""
    spec = _campaign(campaign_id, [agent], max_steps)
    return (await _submit_and_wait(stack, spec, _drafts(runs, prefix), timeout)).events


async def _overhead(base: Path, runs: int, tool_steps: int, command: str) -> list[Row]:
    # The model in a process of its own, as deployed (see bench.model_process).
    with (
        scripted_process(tool_steps, command=command) as model_url,
        NatsServer(base / "nats") as server,
    ):
        async with _Stack(base, server, concurrency=1) as stack:
            agent = AgentSpec(agent_id="steps", model=MODEL, base_url=model_url)
            # Warm-up: imports, the SDK client, the first sandboxes (counted for nothing).
            await _run_campaign(stack, "warm", agent, 2, tool_steps + 2, 120, prefix="w")
            # The floor is measured on both sides of the steps: taken after them alone, the
            # host's busy or quiet spells put eight runs' ratios anywhere in 1.1-1.9x.
            model_base, exec_base = await _baselines(stack, model_url, command, 20)
            events = await _run_campaign(stack, "steps", agent, runs, tool_steps + 2, 180)
            model_after, exec_after = await _baselines(stack, model_url, command, 20)
            model_base += model_after
            exec_base += exec_after
    no_pool = await _no_pool_gaps(base, tool_steps, command, runs)
    gaps = _run_gaps(events)
    s = _split(events, stack)
    floor = percentile(model_base, 50) + percentile(exec_base, 50)
    n = len(s.interval)
    return [
        _ms(
            f"step interval p50 ({n} steps, `{command}`)",
            s.interval,
            baseline=(floor, "SDK call alone + direct exec p50, in turn"),
            target="≤ 10 ms",
        ),
        _ms("step interval p95", s.interval, 95),
        _ms(
            "  model call in the runner p50",
            s.model,
            baseline=(percentile(model_base, 50), "same call, SDK alone"),
        ),
        _ms(
            "  command run in the sandbox p50",
            s.sandbox,
            baseline=(percentile(exec_base, 50), "same command, direct"),
        ),
        _ms("  direct exec in a live bubblewrap sandbox p50", exec_base, target="≤ 2 ms"),
        _ms("  tool duration as logged p50 (exec RPC + run)", s.tool),
        _ms("orchestration overhead per step p50", s.overhead, target="< 10 ms"),
        _ms("orchestration overhead per step p95", s.overhead, 95),
        _ms("  of which outside the tool call (event build, unhidden publish) p50", s.runner_only),
        _ms(
            f"run gap p50 (a run's end to the next one's first model call, {len(gaps)} gaps)",
            gaps,
            baseline=(percentile(no_pool, 50), "each sandbox made on demand (max_live 1)"),
        ),
    ]


def _ms(
    name: str,
    values: list[float],
    q: float = 50,
    *,
    baseline: tuple[float, str] | None = None,
    target: str = "",
) -> Row:
    """A runner row of milliseconds: the q-th percentile of values."""
    base, base_name = baseline if baseline is not None else (None, "")
    return Row("runner", name, percentile(values, q), "ms", base, base_name, target)


def bench_overhead(runs: int = 5, tool_steps: int = 10, command: str = "true") -> list[Row]:
    """Per-step orchestration overhead with a zero-latency model (runs one after another)."""
    return _with_base(lambda base: _overhead(base, runs, tool_steps, command))


# --- (b) runs per minute -------------------------------------------------------------------


async def _throughput(base: Path, runs: int, tool_steps: int, concurrency: int) -> list[Row]:
    with (
        scripted_process(tool_steps) as model_url,
        NatsServer(base / "nats") as server,
    ):
        async with _Stack(base, server, concurrency=concurrency) as stack:
            agent = AgentSpec(agent_id="steps", model=MODEL, base_url=model_url)
            await _run_campaign(stack, "warm", agent, 2, tool_steps + 2, 120, prefix="w")
            t0 = time.perf_counter()
            events = await _run_campaign(stack, "rate", agent, runs, tool_steps + 2, 600)
            wall = time.perf_counter() - t0
    failed = sum(isinstance(e, RunFailed) for e in events)
    finished = [e for e in events if isinstance(e, AgentFinished)]
    steps = sum(e.steps for e in finished)
    return [
        Row(
            "runner",
            f"runs/min, {runs} runs × {tool_steps} `bash true` steps + submit, "
            f"concurrency {concurrency}, bubblewrap",
            runs / wall * 60,
            "runs/min",
        ),
        Row("runner", "  agent steps/s in that campaign", steps / wall, "steps/s"),
        Row("runner", "  runs failed", float(failed), "runs"),
    ]


def bench_throughput(runs: int = 200, tool_steps: int = 10, concurrency: int = 8) -> list[Row]:
    """Runs per minute of one in-process runner + sandbox-manager on real bubblewrap."""
    return _with_base(lambda base: _throughput(base, runs, tool_steps, concurrency))


def _with_base(make: Any) -> list[Row]:
    os.environ.setdefault(KEY_ENV, "scripted")
    with tempfile.TemporaryDirectory(prefix="assay-bench-", dir="/var/tmp") as tmp:
        base = Path(tmp)
        base.chmod(0o711)  # sandbox uids must traverse to their workspace mounts
        return asyncio.run(make(base))


def bench_runner() -> list[Row]:
    """Every runner row of `make bench`."""
    return bench_overhead() + bench_throughput()
