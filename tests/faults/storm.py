"""The seeded fault storm: a 50-run campaign on the split stack while a driver kills
(SIGKILL) or pauses (SIGSTOP, longer than the ack wait) every service and nats-server.

One seed fixes the whole schedule: which process is hit, at which point of the campaign
(how many messages it has added to the log), kill or pause, and for how long. Every fault
is printed as it lands, and the schedule is in every failure message, so a failing seed
is its own reproduction: `pytest tests/faults/test_fault_storm.py -k 'seed-N'`.

A fault starts at its point whether or not earlier ones have ended, so faults overlap
(a service killed while nats-server is stopped); one process takes one fault at a time.
When the last has ended every process runs again (a killed one restarted, a paused one
continued) and the campaign must finish on its own. The timing inside the campaign is
the machine's: a seed reproduces the schedule, not the interleaving of messages in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from assay.bus import Bus
from assay.config import Settings
from assay.embedded import NatsServer
from assay.tasks import load_tasks
from assay_schemas import CampaignHistory, JudgeSpec, Limits, SandboxSpec
from assay_testing.demo import JudgeTemper, judge_script
from assay_testing.pipeline import SCRIPTED_KEY, campaign, scripted_agent, write_task
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

from .harness import SERVICES, Cast, ServiceSet, log_events

__all__ = [
    "NATS",
    "STORM_CAMPAIGN",
    "STORM_RUNS",
    "VICTIMS",
    "Exited",
    "Fault",
    "Landed",
    "StormDriver",
    "nats_for",
    "plan",
    "storm_cast",
    "storm_models",
    "wait_for_history",
]

NATS = "nats-server"
VICTIMS = (*SERVICES, NATS)
"""Every process of the split stack; each is hit at least once per seed."""
FaultKind = Literal["kill", "pause"]

STORM_CAMPAIGN = "storm"
STORM_TASKS = 5
STORM_EPOCHS = 5
STORM_AGENTS = ("tidy", "hasty")
STORM_RUNS = STORM_TASKS * STORM_EPOCHS * len(STORM_AGENTS)
"""50 runs: 5 tasks × 2 agents × 5 epochs."""
STORM_JUDGE = "j1"
MODEL_TIMEOUT_S = 5.0
TOOL_TIMEOUT_S = 3.0
"""A command's timeout: a sandbox-manager lost mid-command costs its runner this plus the
client's margin before the step is retried."""
MESSAGES_PER_RUN = 8
"""At least this many log messages per run (request, sandbox, 2+ steps, finish, seal, two
verdicts): the schedule's points lie within the campaign's first `STORM_RUNS` × this."""


def storm_models() -> ScriptedModelServer:
    """The storm's scripted models (no latency: the storm's time goes to its faults)."""
    os.environ[SCRIPTED_KEY] = "scripted"
    tidy = ScriptedSequence(
        [
            ScriptReply.call(
                "bash", {"command": "mkdir -p results && wc -l < data.csv > results/rows.txt"}
            ),
            ScriptReply.call(
                "submit", {"answer": "Summary: the row count is in results/rows.txt."}
            ),
        ]
    )
    hasty = ScriptedSequence(
        [
            ScriptReply.call("write_file", {"path": "notes.md", "content": "# rows\n"}),
            ScriptReply.call("submit", {"answer": "Done; see results/table.csv (p < 0.001)."}),
        ]
    )
    return ScriptedModelServer(
        {"m-tidy": tidy, "m-hasty": hasty, "m-judge": judge_script(JudgeTemper(STORM_JUDGE, 0))}
    )


def storm_cast(server: ScriptedModelServer, root: Path) -> Cast:
    """The 50-run campaign on `server`'s models: tiny tasks, short timeouts."""
    url = server.openai_base_url
    agents = [scripted_agent(a, f"m-{a}", url, timeout_s=MODEL_TIMEOUT_S) for a in STORM_AGENTS]
    judge = JudgeSpec(
        judge_id=STORM_JUDGE,
        model="m-judge",
        base_url=url,
        api_key_env=SCRIPTED_KEY,
        family="scripted",
        timeout_s=MODEL_TIMEOUT_S,
    )
    root.mkdir(parents=True, exist_ok=True)
    judge_file = root / "judge.yaml"
    judge_file.write_text(yaml.safe_dump(judge.model_dump(mode="json")))
    tasks = root / "tasks"
    for i in range(STORM_TASKS):
        rows = "".join(f"{k},{k * i}\n" for k in range(i + 2))
        write_task(tasks, f"count{i}", "Count the rows of my table.", {"data.csv": "a,b\n" + rows})
    spec = campaign(
        STORM_CAMPAIGN,
        agents,
        judges=[judge],
        scripted=True,
        epochs=STORM_EPOCHS,
        limits=Limits(max_steps=6, tool_timeout_s=TOOL_TIMEOUT_S),
        sandbox=SandboxSpec(memory_mb=256, exec_timeout_s=TOOL_TIMEOUT_S, cpu_seconds=20),
    )
    return Cast(server, spec, judge, judge_file, load_tasks(tasks, max_bytes=10_000))


@dataclass(frozen=True)
class Fault:
    """One fault of a schedule: `victim` is hit once the campaign has logged `after` messages."""

    index: int
    victim: str
    kind: FaultKind
    after: int
    """Messages the campaign has added to the log since its submission."""
    hold_s: float
    """A kill: how long the victim stays down; a pause: how long it stays stopped."""

    def __str__(self) -> str:
        what = "SIGKILL, down" if self.kind == "kill" else "SIGSTOP, stopped"
        return f"#{self.index} {self.victim}: {what} {self.hold_s:.1f}s after {self.after} messages"


def plan(seed: int, *, ack_wait_s: float, extra: int = 2) -> list[Fault]:
    """The seed's schedule: every victim once plus `extra` more, in campaign order.

    Pauses outlast the ack wait (the victim's messages are redelivered while it is
    stopped, and it wakes up to duplicates); kills keep it down for up to two seconds.
    """
    rng = random.Random(seed)
    victims = [*VICTIMS, *(rng.choice(VICTIMS) for _ in range(extra))]
    rng.shuffle(victims)
    horizon = STORM_RUNS * MESSAGES_PER_RUN
    points = sorted(rng.randint(1, horizon * 4 // 5) for _ in victims)
    faults = []
    for i, (victim, after) in enumerate(zip(victims, points, strict=True)):
        kind: FaultKind = rng.choice(("kill", "pause"))
        hold = ack_wait_s + rng.uniform(0.5, 2.0) if kind == "pause" else rng.uniform(0.2, 2.0)
        faults.append(Fault(i, victim, kind, after, round(hold, 2)))
    return faults


@dataclass
class Landed:
    """A fault as it happened: when (seconds into the storm) and at which log message."""

    fault: Fault
    t_s: float
    after: int

    def __str__(self) -> str:
        return f"{self.fault}: landed at t={self.t_s:.1f}s, after {self.after}"


@dataclass
class Exited:
    """A service that exited on its own during the storm (then restarted by the driver)."""

    service: str
    rc: int
    t_s: float

    def __str__(self) -> str:
        return f"{self.service} exited on its own (rc={self.rc}) at t={self.t_s:.1f}s; restarted"


@dataclass
class StormDriver:
    """Lands a schedule on a running split stack, and restarts what dies on its own.

    A fault starts once the log reaches its point, whether or not earlier faults have
    ended (one victim is hit by one fault at a time), so faults may overlap: a service
    killed while nats-server is stopped, say. Like a deployment's supervisor, the driver
    restarts a service that exits by itself (one started while nats-server is down gives
    up on connecting); each such exit is recorded and printed.
    """

    bus: Bus
    services: ServiceSet
    server: NatsServer
    schedule: list[Fault]
    landed: list[Landed] = field(default_factory=list)
    exited: list[Exited] = field(default_factory=list)
    began: float = field(default_factory=time.monotonic)
    base: int = 0
    """Messages in the log when the storm began (the campaign's submission)."""
    _turns: dict[str, asyncio.Lock] = field(default_factory=dict)
    """Per process: held by its fault, or by the supervisor restarting it (never both)."""

    def _turn(self, name: str) -> asyncio.Lock:
        return self._turns.setdefault(name, asyncio.Lock())

    def describe(self) -> str:
        """The schedule, and where each fault landed so far (for failure messages)."""
        done = {x.fault.index: x for x in self.landed}
        lines = [
            str(done.get(f.index, f)) + ("" if f.index in done else " (not reached)")
            for f in self.schedule
        ]
        lines += map(str, self.exited)
        return f"fault schedule (log base {self.base}):\n  " + "\n  ".join(lines)

    def _t(self) -> float:
        return time.monotonic() - self.began

    async def messages(self) -> int:
        """How many messages the stream holds (-1 while the server does not answer)."""
        try:
            info = await asyncio.wait_for(self.bus.js.stream_info(self.bus.settings.stream), 2.0)
        except Exception:  # the server may be down or stopped: no progress to read
            return -1
        return int(info.state.messages)

    @contextlib.asynccontextmanager
    async def supervising(self) -> AsyncIterator[StormDriver]:
        """Restart any service that exits on its own until the block ends."""
        supervisor = asyncio.create_task(self._supervise())
        try:
            yield self
        finally:
            supervisor.cancel()
            await asyncio.gather(supervisor, return_exceptions=True)

    async def run(self, *, stall_s: float = 120.0) -> None:
        """Land every fault of the schedule; return once all of them have ended."""
        self.began = time.monotonic()
        self.base = await self.messages()
        active: dict[str, asyncio.Task[None]] = {}
        try:
            for fault in self.schedule:
                after = await self._reach(fault, stall_s)
                if fault.victim in active:
                    await active.pop(fault.victim)
                landed = Landed(fault, self._t(), after)
                print(f"[storm] {landed}", flush=True)
                self.landed.append(landed)
                active[fault.victim] = asyncio.create_task(self._inject(fault))
            await asyncio.gather(*active.values())
        finally:
            for task in active.values():
                task.cancel()
            await asyncio.gather(*active.values(), return_exceptions=True)

    async def _reach(self, fault: Fault, stall_s: float) -> int:
        deadline = time.monotonic() + stall_s
        while (after := await self.messages() - self.base) < fault.after:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the log stalled before fault {fault}\n{self.describe()}\n"
                    f"{self.services.log_tail()}"
                )
            await asyncio.sleep(0.05)
        return after

    async def _inject(self, fault: Fault) -> None:
        async with self._turn(fault.victim):
            if fault.victim == NATS:
                await self._hit_server(fault)
            elif fault.kind == "kill":
                await self.services.kill(fault.victim)
                await asyncio.sleep(fault.hold_s)
                await self.services.start(fault.victim)
            else:
                await _paused(self.services.procs[fault.victim].pid, fault.hold_s)

    async def _hit_server(self, fault: Fault) -> None:
        if fault.kind == "kill":
            await asyncio.to_thread(self.server.kill)
            await asyncio.sleep(fault.hold_s)
            await asyncio.to_thread(self.server.start)
        else:
            assert self.server.process is not None
            await _paused(self.server.process.pid, fault.hold_s)

    async def _supervise(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            for name in SERVICES:
                if self._turn(name).locked():
                    continue  # under a fault: down or stopped on purpose
                async with self._turn(name):
                    proc = self.services.procs.get(name)
                    if proc is None or proc.returncode is None:
                        continue
                    self.exited.append(exited := Exited(name, proc.returncode, self._t()))
                    print(f"[storm] {exited}", flush=True)
                    await self.services.start(name)


async def _paused(pid: int, hold_s: float) -> None:
    """SIGSTOP a process group for `hold_s`, then SIGCONT it (even if the test is cancelled)."""
    os.killpg(pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(hold_s)
    finally:
        os.killpg(pid, signal.SIGCONT)


async def wait_for_history(
    bus: Bus,
    done: Callable[[CampaignHistory], bool],
    *,
    timeout: float,
) -> CampaignHistory:
    """Poll the log until its campaign history satisfies `done`."""
    deadline = time.monotonic() + timeout
    history = CampaignHistory()
    while True:
        try:
            history = CampaignHistory()
            for event in await log_events(bus):
                history.apply(event)
        except Exception:  # the log may be briefly unavailable after a server restart
            pass
        if done(history):
            return history
        if time.monotonic() > deadline:
            raise AssertionError(
                f"campaign not done in {timeout}s: {history.state_counts()}; pending runs "
                f"{sorted(history.pending_runs())[:5]}, verdicts "
                f"{sorted(history.pending_verdicts())[:5]}"
            )
        await asyncio.sleep(0.5)


def nats_for(settings: Settings) -> NatsServer:
    """The storm's own nats-server, on `<home>/nats` (where `--home` finds the log)."""
    return NatsServer(settings.home / "nats")
