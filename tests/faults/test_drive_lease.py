"""A run driven by two runners at once: its SandboxReady delivered again while a runner
still drives it.

The compose campaign (tests/deploy/test_compose_campaign.py) kills the stream leader's
node; the runners' durable often has its leader there, and a new consumer leader
delivers the messages in progress again at once, however faithfully their handler sends
`in_progress`: seen with nats-server on a 3-node cluster (ack wait 6 s, `in_progress`
every 2 s, the durable's leader node SIGKILLed), another puller had the message again
5 s later while the first handler still worked. The other runner replica then drives the
run beside the first: it reads the log, where the step the first is running is not yet,
and runs that step's commands again (the managers' logs showed such a second drive's
commands meeting the run's end: a closed pipe, the sandbox destroyed under them). In
one campaign a control wearing scripted-careful ran `python3 solve.py` (step 2) through
the outage, then overwrote the results with wrong figures (step 3); the second drive's
`python3 solve.py` ran after that and restored them, so the seal held files the log does
not explain (250 bytes sealed where step 3 logged writing 251) and the run's rule and
reference checks differed from the one-process run's.

Here the second delivery is handed to a second runner by hand (which consumer leader
NATS elects, and which replica pulls first, is not the test's to choose)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from assay.bus import Bus, Delivery
from assay.config import Settings
from assay.providers import (
    Completion,
    GenerationParams,
    Message,
    ModelProvider,
    ProviderWrapper,
    ToolDefinition,
)
from assay.sandbox_client import DriveSuperseded
from assay.store import LocalBlobStore
from assay_aggregator.check import check_stream
from assay_runner.service import build as build_runner
from assay_schemas import (
    AgentFinished,
    AgentSpec,
    AgentStepLogged,
    ArtifactsSealed,
    Event,
    RunFailed,
    SandboxReady,
)
from assay_testing import pipeline
from assay_testing.scripted import ScriptedSequence, ScriptReply

pytestmark = pytest.mark.timeout(180)

STEP_S = 4
"""Each step's command runs this long: the second drive starts while one runs."""
WORKER = ScriptedSequence(
    [
        ScriptReply.call("bash", {"command": f"echo step{i} >> ran.txt; sleep {STEP_S}"})
        for i in range(3)
    ]
    + [ScriptReply.call("submit", {"answer": "see ran.txt"})]
)


async def test_a_step_runs_once_when_a_run_is_delivered_again_mid_drive(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(tmp_path / "tasks", "t1", "go", {"a.txt": "x"})
    with pipeline.scripted_server({"worker": WORKER}) as models:
        spec = pipeline.campaign(
            "c1", [pipeline.scripted_agent("a1", "worker", models.openai_base_url)]
        )
        async with pipeline.services(settings, store):  # the runner drives the run
            other = build_runner(
                settings.model_copy(update={"instance": "runner-2"}),
                store=store,
                providers=pipeline.fast_providers,
            )
            await other.bus.connect()  # the replica handed the run again: consumes nothing
            try:
                await pipeline.submit_folder(bus, store, spec, folder, max_bytes=1000)
                await pipeline.wait_for_events(
                    bus, lambda evs: any(isinstance(e, AgentStepLogged) for e in evs)
                )
                await asyncio.sleep(1)  # step 1's command is running
                [(sequence, ready)] = [
                    (m.sequence, m.event)
                    async for m in bus.replay()
                    if isinstance(m.event, SandboxReady)
                ]
                assert isinstance(ready, SandboxReady)
                await other.on_sandbox_ready(ready, Delivery(sequence, 2))
                events = await pipeline.wait_for_events(
                    bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
                )
            finally:
                await other.bus.stop()
                await other.aclose()
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
    ran = next(f for f in sealed.files if f.path == "ran.txt")
    assert store.get_bytes(ran.sha256).decode().split() == ["step0", "step1", "step2"]


LEASE_S = 2.0
"""The sandbox-manager's drive lease here (15 s by default)."""
PAUSE_S = 6.0
"""How long the first drive stalls in its second model turn: past the lease (its run is
taken over) and short of the taking drive's end (its next command is refused)."""
TAKEN = ScriptedSequence(
    [ScriptReply.call("bash", {"command": "echo step0 >> ran.txt"})]
    + [
        ScriptReply.call("bash", {"command": f"echo step{i} >> ran.txt; sleep {STEP_S}"})
        for i in (1, 2)
    ]
    + [ScriptReply.call("submit", {"answer": "see ran.txt"})]
)


@dataclass(kw_only=True)
class Stalled(ProviderWrapper):
    """The first drive's model client: its second turn, the first time, takes PAUSE_S
    (a runner stalled: a long garbage collection, a paused VM)."""

    stalled: list[bool]

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        if not self.stalled and sum(m.role == "assistant" for m in messages) == 1:
            self.stalled.append(True)
            await asyncio.sleep(PAUSE_S)
        return await self.inner.complete(messages, tools, params)


def stalling(stalled: list[bool]) -> Callable[[AgentSpec], ModelProvider]:
    return lambda agent: Stalled(inner=pipeline.fast_providers(agent), stalled=stalled)


Drive = Callable[[SandboxReady, Delivery], Awaitable[None]]


def outcomes_of(drive: Drive, outcomes: list[type[BaseException] | None]) -> Drive:
    """`drive`, each outcome recorded: None when it returned, else the class it raised."""

    async def recorded(event: SandboxReady, delivery: Delivery) -> None:
        try:
            await drive(event, delivery)
        except BaseException as e:
            outcomes.append(type(e))
            raise
        outcomes.append(None)

    return recorded


async def test_a_drive_taken_over_after_stalling_is_refused_and_publishes_nothing(
    bus: Bus, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_SANDBOX_DRIVE_LEASE_S", str(LEASE_S))
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(tmp_path / "tasks", "t1", "go", {"a.txt": "x"})
    stalled: list[bool] = []
    first: list[type[BaseException] | None] = []
    with pipeline.scripted_server({"worker": TAKEN}) as models:
        spec = pipeline.campaign(
            "c1", [pipeline.scripted_agent("a1", "worker", models.openai_base_url)]
        )
        async with pipeline.services(settings, store, providers=stalling(stalled)) as started:
            runner = started["runner"]
            # The bus's handler calls `_run` at each delivery: its outcomes are observed.
            runner._run = outcomes_of(runner._run, first)
            other = build_runner(
                settings.model_copy(update={"instance": "runner-2"}),
                store=store,
                providers=pipeline.fast_providers,
            )
            other.claim_poll_s = 0.5
            await other.bus.connect()
            try:
                await pipeline.submit_folder(bus, store, spec, folder, max_bytes=1000)
                await pipeline.wait_for_events(
                    bus, lambda evs: any(isinstance(e, AgentStepLogged) for e in evs)
                )
                assert stalled, "the first drive's second turn has begun"
                [(sequence, ready)] = [
                    (m.sequence, m.event)
                    async for m in bus.replay()
                    if isinstance(m.event, SandboxReady)
                ]
                assert isinstance(ready, SandboxReady)
                began = asyncio.get_running_loop().time()
                await other.on_sandbox_ready(ready, Delivery(sequence, 2))
                took = asyncio.get_running_loop().time() - began
                events = await pipeline.wait_for_events(
                    bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
                )
                await pipeline.wait_for_events(bus, lambda _: bool(first), timeout=30)
            finally:
                await other.bus.stop()
                await other.aclose()
    # The stalled drive's step-1 command was refused: it raised, and the bus left the
    # message (no nak) to the drive that took the run over.
    assert first[0] is DriveSuperseded
    assert took < PAUSE_S + 2 * STEP_S + LEASE_S + 10  # waited out the lease, not more
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
    ran = next(f for f in sealed.files if f.path == "ran.txt")
    assert store.get_bytes(ran.sha256).decode().split() == ["step0", "step1", "step2"]
    ends: list[Event] = [e for e in events if isinstance(e, AgentFinished | RunFailed)]
    assert [type(e) for e in ends] == [AgentFinished]
    steps = [e.step for e in events if isinstance(e, AgentStepLogged)]
    assert steps == sorted(set(steps)) == [0, 1, 2, 3]
    checked = await check_stream(settings, replay=False, grace_s=0.0)
    # No judge serves here: the sealed run's missing verdict is the only breach allowed.
    breaches = [b for b in checked.breaches if b.kind != "verdict_missing"]
    assert checked.runs == 1 and breaches == [], [str(b) for b in breaches]
