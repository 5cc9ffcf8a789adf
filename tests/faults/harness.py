"""The fault suite's harness: one scripted campaign, services as processes, log audits.

Every fault test runs the same small campaign (2 tasks × 2 agents × 1 LLM judge + the
rule judge) with every service as its own `assay serve NAME` process, disturbs it, waits
for it to complete, then checks the promise made to users:

- no event is lost: the log holds exactly the event ids an undisturbed run holds, and
  nothing sits in the dead-letter stream;
- no effect happens twice: no event id is stored twice, and each effect key — a step of a
  run, a run's seal, a judge's sample of a run — appears once;
- the report equals the undisturbed one, figure for figure, wall-clock timings aside.

The undisturbed run is made once per session (`baseline`) on its own stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.security.controls import controls_key
from assay.store import BlobStore
from assay.tasks import TaskDraft, load_tasks
from assay_aggregator.rebuild import fold_stream
from assay_aggregator.snapshot import paths_for
from assay_report.canonical import canonical_json
from assay_report.projections import Projections
from assay_report.report import build_report
from assay_report.state import State
from assay_schemas import (
    AgentFinished,
    AgentSpec,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignSpec,
    Event,
    JudgeSpec,
    JudgmentRecorded,
    Limits,
    RunRequested,
    SandboxReady,
    SandboxSpec,
    run_id_for,
)
from assay_testing.demo import JudgeTemper, judge_script
from assay_testing.pipeline import SCRIPTED_KEY, campaign, scripted_agent, settings_env, write_task
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

__all__ = [
    "CAMPAIGN_ID",
    "JUDGE_ID",
    "SERVICES",
    "Audit",
    "Baseline",
    "Cast",
    "ServiceSet",
    "TcpProxy",
    "aggregator_report",
    "audit_log",
    "baseline",
    "campaign_complete",
    "check_against_baseline",
    "full_report",
    "log_events",
    "report_figures",
    "started_bus",
    "wait_until",
]

CAMPAIGN_ID = "faults"
"""Same id in every test: the report's bootstrap seed and every event id derive from it."""
JUDGE_ID = "j1"
RULES_ID = "rules"
AGENTS = ("careful", "overclaimer")
TASKS = ("sums", "means")
SERVICES = ("sandbox-manager", "runner", "judge", "rules", "aggregator")
AGENT_LATENCY_S = 0.4
"""Scripted model latency: slow enough that a kill lands mid-run, fast enough for CI."""
JUDGE_LATENCY_S = 0.3
MODEL_TIMEOUT_S = 3.0
"""Client timeout of every scripted model, so an injected timeout costs seconds, not minutes."""

_SOLVE = """\
import csv, os
rows = list(csv.DictReader(open('data.csv')))
os.makedirs('results', exist_ok=True)
with open('results/summary.csv', 'w') as out:
    out.write('column,sum\\n')
    for col in rows[0]:
        out.write(f"{col},{sum(float(r[col]) for r in rows)}\\n")
print(len(rows), 'rows')
"""


def _careful() -> ScriptedSequence:
    # Tool outputs are deterministic (no `ls -l` timestamps): the next request's size, and
    # so its token count and cost, must be the same in every run for reports to compare.
    return ScriptedSequence(
        [
            ScriptReply.call(
                "bash", {"command": "head -n 3 data.csv"}, text="Looking at the data."
            ),
            ScriptReply.call("write_file", {"path": "solve.py", "content": _SOLVE}),
            ScriptReply.call("bash", {"command": "python3 solve.py"}),
            ScriptReply.call(
                "submit", {"answer": "Summary: column sums are in results/summary.csv."}
            ),
        ]
    )


def _overclaimer() -> ScriptedSequence:
    return ScriptedSequence(
        [
            ScriptReply.call(
                "write_file", {"path": "analysis.py", "content": "# TODO: fit model\n"}
            ),
            ScriptReply.call(
                "submit",
                {
                    "answer": "Highly significant (p < 0.001); see results/figure1.png and results/table.csv."
                },
            ),
        ]
    )


@dataclass
class Cast:
    """The scripted campaign: models on a scripted server, its spec, tasks and judge file."""

    server: ScriptedModelServer
    spec: CampaignSpec
    judge: JudgeSpec
    judge_file: Path
    drafts: list[TaskDraft]

    @staticmethod
    def models() -> ScriptedModelServer:
        """The scripted models of the campaign, on a server not yet started.

        One server serves a whole session: model URLs are part of the specs on the log
        (a judge's registration id hashes its spec), so every run must see the same ones.
        """
        os.environ[SCRIPTED_KEY] = "scripted"
        scripts: dict[str, Any] = {
            "m-careful": _careful(),
            "m-overclaimer": _overclaimer(),
            "m-judge": judge_script(JudgeTemper(JUDGE_ID, 0)),
        }
        server = ScriptedModelServer(scripts)
        for model in ("m-careful", "m-overclaimer"):
            server.set_latency(model, AGENT_LATENCY_S)
        server.set_latency("m-judge", JUDGE_LATENCY_S)
        return server

    @classmethod
    def write(cls, server: ScriptedModelServer, root: Path) -> Cast:
        """The campaign on `server`'s models, its task folders and judge file under `root`."""
        url = server.openai_base_url
        agents: list[AgentSpec] = [
            scripted_agent(a, f"m-{a}", url, timeout_s=MODEL_TIMEOUT_S) for a in AGENTS
        ]
        judge = JudgeSpec(
            judge_id=JUDGE_ID,
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
        write_task(
            tasks, "sums", "Sum each column of my table.", {"data.csv": "a,b\n1,2\n3,4\n5,6\n"}
        )
        write_task(
            tasks, "means", "Summarise my counts per column.", {"data.csv": "x,y\n7,1\n8,2\n"}
        )
        # Short tool timeouts: a sandbox-manager killed mid-command costs its runner one
        # request timeout (tool timeout + margin) before the run is redelivered.
        spec = campaign(
            CAMPAIGN_ID,
            agents,
            judges=[judge],
            scripted=True,
            limits=Limits(max_steps=10, tool_timeout_s=10),
            sandbox=SandboxSpec(memory_mb=1024, exec_timeout_s=10, cpu_seconds=60),
        )
        return cls(server, spec, judge, judge_file, load_tasks(tasks, max_bytes=10_000))

    @property
    def run_ids(self) -> list[str]:
        """The runs the campaign schedules (deterministic ids)."""
        return [
            run_id_for(CAMPAIGN_ID, t, a.agent_id, e)
            for t in TASKS
            for a in self.spec.agents
            for e in range(self.spec.epochs)
        ]

    async def submit(self, bus: Bus, store: BlobStore) -> None:
        """Publish the campaign and its tasks."""
        await submit_campaign(bus, store, self.spec, self.drafts)


# --- services as processes ---------------------------------------------------------------


@dataclass
class ServiceSet:
    """`assay serve NAME` processes, each killable and restartable on its own."""

    settings: Settings
    cast: Cast
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)

    def _args(self, name: str) -> list[str]:
        if name == "judge":
            return ["judge", "--judge", str(self.cast.judge_file)]
        return [name]

    async def start(self, *names: str) -> None:
        """Start the named services (all of them by default)."""
        self.settings.home.mkdir(parents=True, exist_ok=True)
        env = settings_env(self.settings) | self.env
        for name in names or SERVICES:
            assert name not in self.procs or self.procs[name].returncode is not None, name
            # One log per service, appended across restarts: read it when a test fails.
            with (self.settings.home / f"{name}.log").open("ab") as log:
                self.procs[name] = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "assay_cli",
                    "serve",
                    *self._args(name),
                    env=env,
                    stdout=log,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                )

    async def kill(self, name: str) -> None:
        """SIGKILL a service's whole process group (no cleanup runs: that is the fault)."""
        proc = self.procs.pop(name)
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop every service: SIGTERM (they stop cleanly), SIGKILL after `grace_s`."""
        procs, self.procs = self.procs, {}
        for proc in procs.values():
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs.values():
            try:
                await asyncio.wait_for(proc.wait(), grace_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()

    def log_text(self, name: str) -> str:
        """Everything a service has logged so far (across restarts)."""
        path = self.settings.home / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def log_tail(self, chars: int = 3000) -> str:
        """The end of every service log (for failure messages)."""
        out = []
        for name in SERVICES:
            path = self.settings.home / f"{name}.log"
            if path.exists():
                out.append(f"--- {name} ---\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(out)

    @classmethod
    @contextlib.asynccontextmanager
    async def running(
        cls, settings: Settings, cast: Cast, *, env: dict[str, str] | None = None
    ) -> AsyncIterator[ServiceSet]:
        """Every service started; all stopped on exit, whatever happened."""
        services = cls(settings, cast, env or {})
        await services.start()
        try:
            yield services
        finally:
            await services.stop()


@contextlib.asynccontextmanager
async def started_bus(settings: Settings, timeout: float = 30.0) -> AsyncIterator[Bus]:
    """A started test bus, retried while a fresh server or cluster gets JetStream ready."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        bus = Bus(settings, service="test")
        try:
            await bus.start()
            break
        except Exception:
            with contextlib.suppress(Exception):
                await bus.stop()
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.5)
    try:
        yield bus
    finally:
        await bus.stop()


# --- reading and auditing the log --------------------------------------------------------


async def log_events(bus: Bus) -> list[Event]:
    """Every event in the test's stream, in log order."""
    return [e.event async for e in bus.replay()]


def campaign_complete(run_ids: Iterable[str]) -> Callable[[list[Event]], bool]:
    """Predicate: every run sealed and judged by the LLM judge and the rule judge."""
    wanted = set(run_ids)

    def check(events: list[Event]) -> bool:
        sealed = {e.run_id for e in events if isinstance(e, ArtifactsSealed)}
        judged = {(e.run_id, e.judge_id) for e in events if isinstance(e, JudgmentRecorded)}
        return wanted <= sealed and all(
            (r, j) in judged for r in wanted for j in (JUDGE_ID, RULES_ID)
        )

    return check


async def wait_until(
    bus: Bus,
    predicate: Callable[[list[Event]], bool],
    *,
    timeout: float,
    services: ServiceSet | None = None,
    what: str = "the expected state",
) -> list[Event]:
    """Poll the log until `predicate` holds; on timeout fail with the services' logs."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            events = await log_events(bus)
        except Exception:  # the server may be down during a fault; poll again
            events = []
        if events and predicate(events):
            return events
        if asyncio.get_running_loop().time() > deadline:
            kinds = Counter(e.event_type for e in events)
            logs = services.log_tail() if services else ""
            raise AssertionError(
                f"log did not reach {what} in {timeout}s; it holds {dict(kinds)}\n{logs}"
            )
        await asyncio.sleep(0.3)


class Audit(NamedTuple):
    """What a log holds, and every duplicate found in it."""

    n_events: int
    by_type: dict[str, int]
    event_ids: frozenset[tuple[str, str]]
    """(event_type, event_id) of every stored event."""
    duplicate_ids: int
    """Event ids stored more than once (extra copies)."""
    duplicate_effects: dict[str, int]
    """Extra copies per effect key: a run's step, seal, finish; a judge's sample of a run."""
    dead_letters: int

    @property
    def n_duplicates(self) -> int:
        """Every extra copy, by id and by effect key."""
        return self.duplicate_ids + sum(self.duplicate_effects.values())


def _extra(keys: Iterable[object]) -> int:
    return sum(n - 1 for n in Counter(keys).values() if n > 1)


async def audit_log(bus: Bus) -> Audit:
    """Count the log's events and every duplicate by id and by effect key."""
    events = await log_events(bus)
    effects = {
        "RunRequested per run": _extra(e.run_id for e in events if isinstance(e, RunRequested)),
        "SandboxReady per run": _extra(e.run_id for e in events if isinstance(e, SandboxReady)),
        "AgentStepLogged per (run, step)": _extra(
            (e.run_id, e.step) for e in events if isinstance(e, AgentStepLogged)
        ),
        "AgentFinished per run": _extra(e.run_id for e in events if isinstance(e, AgentFinished)),
        "ArtifactsSealed per run": _extra(
            e.run_id for e in events if isinstance(e, ArtifactsSealed)
        ),
        "JudgmentRecorded per (run, judge, sample)": _extra(
            (e.run_id, e.judge_id, e.sample) for e in events if isinstance(e, JudgmentRecorded)
        ),
    }
    info = await bus.js.stream_info(f"{bus.settings.stream}_DLQ")
    return Audit(
        n_events=len(events),
        by_type=dict(sorted(Counter(e.event_type for e in events).items())),
        event_ids=frozenset((e.event_type, e.event_id) for e in events),
        duplicate_ids=_extra(e.event_id for e in events),
        duplicate_effects=effects,
        dead_letters=int(info.state.messages),
    )


# --- the report ---------------------------------------------------------------------------

WALL_CLOCK_METRICS = frozenset({"latency_s"})
"""`run_costs` rows measured by a clock: the only report figures a fault may change."""


def _without_wall_clock(report: dict[str, Any]) -> dict[str, Any]:
    stats = dict(report["statistics"])
    stats["run_costs"] = [r for r in stats["run_costs"] if r["metric"] not in WALL_CLOCK_METRICS]
    return {**report, "statistics": stats}


async def report_figures(bus: Bus) -> bytes:
    """The report of a fresh fold of the whole log, as canonical JSON without clock figures
    (its control declarations opened with the deployment's key, as the aggregator does)."""
    state = await fold_stream(bus.js, bus.settings.stream, bus.subjects.events, state=_keyed(bus))
    report = build_report(Projections(state))
    return bytes(canonical_json(_without_wall_clock(report.model_dump(mode="python"))))


async def full_report(bus: Bus) -> bytes:
    """The full report (clock figures included) of a fresh fold, as `assay replay` builds it."""
    from assay_report.report import report_json

    state = await fold_stream(bus.js, bus.settings.stream, bus.subjects.events, state=_keyed(bus))
    return bytes(report_json(build_report(Projections(state))))


def _keyed(bus: Bus) -> State:
    """A fresh fold's state that opens the deployment's control declarations."""
    return State(controls_key=controls_key(bus.settings))


def aggregator_report(settings: Settings) -> bytes | None:
    """The report the aggregator service last wrote, if any."""
    path = paths_for(settings).report
    return path.read_bytes() if path.exists() else None


# --- the undisturbed reference run ------------------------------------------------------


class Baseline(NamedTuple):
    """An undisturbed run of the campaign: its audit and report figures."""

    audit: Audit
    figures: bytes
    seconds: float


_baseline: Baseline | None = None
_baseline_lock = asyncio.Lock()


async def baseline(settings: Settings, models: ScriptedModelServer, root: Path) -> Baseline:
    """The undisturbed run (made once per session, on its own stream and prefix)."""
    global _baseline
    async with _baseline_lock:
        if _baseline is None:
            # Own stream, prefix, home and sandbox state: sandbox ids derive from run ids,
            # which are the same in every run of the campaign.
            state = settings.state_dir / "baseline"
            state.mkdir(mode=0o711)
            own = settings.model_copy(
                update={
                    "stream": f"{settings.stream}BASE",
                    "subject_prefix": f"{settings.subject_prefix}base",
                    "home": root / "baseline-home",
                    "state_dir": state,
                }
            )
            _baseline = await _run_undisturbed(own, Cast.write(models, root / "baseline"))
        return _baseline


async def _run_undisturbed(settings: Settings, cast: Cast) -> Baseline:
    from assay.store import open_store

    loop = asyncio.get_running_loop()
    began = loop.time()
    async with Bus(settings, service="test") as bus:
        store = open_store(settings)
        async with ServiceSet.running(settings, cast) as services:
            await cast.submit(bus, store)
            await wait_until(
                bus,
                campaign_complete(cast.run_ids),
                timeout=120,
                services=services,
                what="a complete undisturbed campaign",
            )
        audit = await audit_log(bus)
        figures = await report_figures(bus)
    seconds = loop.time() - began
    print(f"\nbaseline: {audit.n_events} events {audit.by_type} in {seconds:.1f}s")
    return Baseline(audit, figures, seconds)


async def check_against_baseline(bus: Bus, base: Baseline, *, label: str) -> Audit:
    """Assert the promise (nothing lost, nothing twice, same report) and print the figures."""
    audit = await audit_log(bus)
    figures = await report_figures(bus)
    lost = base.audit.event_ids - audit.event_ids
    extra = audit.event_ids - base.audit.event_ids
    print(
        f"\n[{label}] events: undisturbed {base.audit.n_events}, disturbed {audit.n_events}; "
        f"lost: {len(lost)}; unexpected: {len(extra)}; dead letters: {audit.dead_letters}\n"
        f"[{label}] duplicates by event_id: {audit.duplicate_ids}; by effect key: "
        f"{sum(audit.duplicate_effects.values())} {audit.duplicate_effects}\n"
        f"[{label}] report figures ({len(figures)} bytes, wall-clock excluded) equal: "
        f"{figures == base.figures}"
    )
    assert not lost, f"events lost: {sorted(lost)}"
    assert not extra, f"events an undisturbed run does not have: {sorted(extra)}"
    assert audit.dead_letters == 0, "messages were dead-lettered"
    assert audit.duplicate_ids == 0 and not any(audit.duplicate_effects.values()), audit
    assert audit.by_type == base.audit.by_type
    if figures != base.figures:
        raise AssertionError(_first_difference(figures, base.figures))
    return audit


def _first_difference(got: bytes, want: bytes) -> str:
    i = next(
        (k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
        min(len(got), len(want)),
    )
    return (
        "report figures differ from the undisturbed run at byte "
        f"{i}:\n got  …{got[max(0, i - 300) : i + 200].decode()}…\n want …{want[max(0, i - 300) : i + 200].decode()}…"
    )


# --- a TCP proxy that can fail on demand -------------------------------------------------


class TcpProxy:
    """A loopback TCP proxy to `target` that can refuse and cut connections (an outage).

    It runs its own event loop on a thread, so the test's loop can be busy waiting.
    """

    def __init__(self, target: tuple[str, int], port: int, host: str = "127.0.0.1") -> None:
        self.target = target
        self.host = host
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.StreamWriter] = set()

    @property
    def endpoint(self) -> str:
        """host:port of the proxy."""
        return f"{self.host}:{self.port}"

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def start(self) -> TcpProxy:
        """Start the thread and listen."""
        self._thread.start()
        self.resume()
        return self

    def resume(self) -> None:
        """Accept connections again."""
        self._call(self._listen())

    def outage(self) -> None:
        """Stop listening (new connections are refused) and cut every open one."""
        self._call(self._close())

    def stop(self) -> None:
        """Close everything and end the thread."""
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(
                self._pipe, self.host, self.port, reuse_address=True
            )

    async def _close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._conns):
            writer.transport.abort()
        self._conns.clear()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._conns |= {writer, up_writer}

        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                # One side hung up: hang up the other, so neither waits on a dead peer.
                dst.transport.abort()

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))
        self._conns -= {writer, up_writer}
