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
import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from assay.bus import Bus, Delivery
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_aggregator.check import check_stream
from assay_runner.service import build as build_runner
from assay_schemas import (
    AgentFinished,
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
THINK_S = 3.0
"""The model's latency while the first drive is stopped: it is stopped mid-turn, no
command of its running."""
TAKEN = ScriptedSequence(
    [ScriptReply.call("bash", {"command": "echo step0 >> ran.txt"})]
    + [
        ScriptReply.call("bash", {"command": f"echo step{i} >> ran.txt; sleep {STEP_S}"})
        for i in (1, 2)
    ]
    + [ScriptReply.call("submit", {"answer": "see ran.txt"})]
)


def step_logged(step: int) -> Callable[[list[Event]], bool]:
    return lambda evs: any(isinstance(e, AgentStepLogged) and e.step == step for e in evs)


async def test_a_drive_taken_over_after_stalling_is_refused_and_publishes_nothing(
    bus: Bus, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first runner process is stopped (SIGSTOP: a paused VM, a long GC) mid-drive, a
    second delivery of its run takes the run over once the lease lapses, and the first,
    continued, is refused its next command and stops: the run's steps each run once."""
    monkeypatch.setenv("ASSAY_SANDBOX_DRIVE_LEASE_S", str(LEASE_S))
    settings.home.mkdir(parents=True, exist_ok=True)
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(tmp_path / "tasks", "t1", "go", {"a.txt": "x"})
    with pipeline.scripted_server({"worker": TAKEN}) as models:
        models.set_latency("worker", THINK_S)
        spec = pipeline.campaign(
            "c1", [pipeline.scripted_agent("a1", "worker", models.openai_base_url)]
        )
        async with (
            pipeline.services(settings, store, names=("sandbox-manager",)),
            pipeline.service_process("runner", settings) as first,
        ):
            other = build_runner(
                settings.model_copy(update={"instance": "runner-2"}),
                store=store,
                providers=pipeline.fast_providers,
            )
            other.claim_poll_s = 0.5
            await other.bus.connect()
            try:
                await pipeline.submit_folder(bus, store, spec, folder, max_bytes=1000)
                await pipeline.wait_for_events(bus, step_logged(0), timeout=90)
                os.kill(first.pid, signal.SIGSTOP)  # waiting on its model for step 1
                models.set_latency("worker", 0.0)
                [(sequence, ready)] = [
                    (m.sequence, m.event)
                    async for m in bus.replay()
                    if isinstance(m.event, SandboxReady)
                ]
                assert isinstance(ready, SandboxReady)
                taking = asyncio.create_task(other.on_sandbox_ready(ready, Delivery(sequence, 2)))
                await pipeline.wait_for_events(bus, step_logged(1))
                os.kill(first.pid, signal.SIGCONT)  # step 2's command runs: the first wakes
                await taking
                events = await pipeline.wait_for_events(
                    bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
                )
                for _ in range(100):  # the first's refusal is logged as it meets it
                    if "DriveSuperseded" in (settings.home / "runner.log").read_text():
                        break
                    await asyncio.sleep(0.1)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(first.pid, signal.SIGCONT)
                await other.bus.stop()
                await other.aclose()
    # The continued drive was refused (its bus left the message to the drive at work).
    assert "DriveSuperseded" in (settings.home / "runner.log").read_text()
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
    ran = next(f for f in sealed.files if f.path == "ran.txt")
    assert store.get_bytes(ran.sha256).decode().split() == ["step0", "step1", "step2"]
    ends = [e for e in events if isinstance(e, AgentFinished | RunFailed)]
    assert [type(e) for e in ends] == [AgentFinished]
    steps = [e.step for e in events if isinstance(e, AgentStepLogged)]
    assert steps == sorted(set(steps)) == [0, 1, 2, 3]
    checked = await check_stream(settings, replay=False, grace_s=0.0)
    # No judge serves here: the sealed run's missing verdict is the only breach allowed.
    breaches = [b for b in checked.breaches if b.kind != "verdict_missing"]
    assert checked.runs == 1 and breaches == [], [str(b) for b in breaches]
