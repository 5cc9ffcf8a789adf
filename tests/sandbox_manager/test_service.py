"""The sandbox-manager service on the real bus: ready, commands over NATS, seal, reconcile."""

from __future__ import annotations

import asyncio
import subprocess
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import NamedTuple

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.sandbox_client import SandboxClient, SandboxGone
from assay.store import LocalBlobStore, store_file
from assay_sandbox_manager.backends import BubblewrapBackend
from assay_sandbox_manager.service import SandboxService, build
from assay_schemas import (
    AgentFinished,
    ArtifactsSealed,
    RunRequested,
    SandboxReady,
    SandboxSpec,
    Task,
    Usage,
)
from assay_testing import events as made
from assay_testing.pipeline import wait_for_events

SPEC = SandboxSpec(memory_mb=512, exec_timeout_s=20)


def run_requested(bus: Bus, run_id: str, task: Task) -> RunRequested:
    return made.run_requested(run_id, task=task, sandbox=SPEC, producer=bus.producer)


def finished(bus: Bus, run_id: str) -> AgentFinished:
    return AgentFinished(
        event_id=AgentFinished.id_for(run_id),
        campaign_id="c1",
        run_id=run_id,
        stop_reason="submitted",
        final_message="see results/out.txt",
        steps=1,
        usage=Usage(),
        producer=bus.producer,
    )


def sandbox_processes(settings: Settings) -> int:
    """Processes whose command line mentions this test's sandbox state (bwrap and children)."""
    out = subprocess.run(
        ["pgrep", "-c", "-f", str(settings.state_dir)], capture_output=True, text=True
    )
    return int(out.stdout.strip() or 0)


def make_task(store: LocalBlobStore, tmp_path: Path) -> Task:
    src = tmp_path / "reads.csv"
    src.write_text("sample,reads\ns1,1000\n")
    return Task(task_id="t1", prompt="p", attachments=[store_file(store, src, "data/reads.csv")])


def backends(settings: Settings) -> dict[str, BubblewrapBackend]:
    state = settings.instance_state
    return {"bubblewrap": BubblewrapBackend(state / "bwrap", state / "seals")}


def ready_of(events: list, run_id: str) -> SandboxReady:  # type: ignore[type-arg]
    return next(e for e in events if isinstance(e, SandboxReady) and e.run_id == run_id)


@asynccontextmanager
async def bubblewrap_manager(
    settings: Settings, store: LocalBlobStore
) -> AsyncIterator[SandboxService]:
    """The sandbox-manager on bubblewrap, started; its connection stopped after."""
    service = build(settings, store=store, backends=backends(settings))  # type: ignore[arg-type]
    await service.start()
    try:
        yield service
    finally:
        await service.bus.stop()


async def request_sandbox(bus: Bus, run_id: str, task: Task) -> SandboxReady:
    """Ask for run `run_id`'s sandbox as the runner does; its SandboxReady once published."""
    await bus.publish(run_requested(bus, run_id, task))
    events = await wait_for_events(
        bus, lambda evs: any(isinstance(e, SandboxReady) and e.run_id == run_id for e in evs)
    )
    return ready_of(events, run_id)


class OpenSandbox(NamedTuple):
    """A started bubblewrap sandbox-manager and one run's sandbox open in it."""

    service: SandboxService
    ready: SandboxReady
    store: LocalBlobStore
    task: Task


@asynccontextmanager
async def open_sandbox(
    bus: Bus, settings: Settings, tmp_path: Path, run_id: str
) -> AsyncIterator[OpenSandbox]:
    """Run `run_id`'s sandbox, its task attaching data/reads.csv, open in a bubblewrap
    sandbox-manager; the manager's connection stopped after."""
    store = LocalBlobStore(settings.blob_dir)
    task = make_task(store, tmp_path)
    async with bubblewrap_manager(settings, store) as service:
        yield OpenSandbox(service, await request_sandbox(bus, run_id, task), store, task)


async def test_ready_exec_over_nats_seal_and_destroy(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    async with open_sandbox(bus, settings, tmp_path, "r1") as opened:
        service, ready, store, _ = opened
        assert [f.path for f in ready.workspace] == ["data/reads.csv"]
        assert ready.image_digest.startswith("bubblewrap:rootfs-")
        client = SandboxClient(bus=bus, instance=ready.instance, sandbox_id=ready.sandbox_id)
        out = await client.exec(
            "cat data/reads.csv && mkdir -p results && echo 42 > results/out.txt && ln -s /etc/shadow results/leak",
            timeout_s=20,
            cwd="/workspace",
        )
        assert out.exit_code == 0
        await client.write_file("notes/a b\nc.md", b"odd name")
        assert {f.path for f in await client.list_files()} >= {"data/reads.csv", "results/out.txt"}
        with pytest.raises(SandboxGone, match="unknown"):
            await SandboxClient(bus=bus, instance=ready.instance, sandbox_id="nope").list_files()
        await bus.publish(finished(bus, "r1"))
        events = await wait_for_events(
            bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
        )
        [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
        paths = {f.path: f for f in sealed.files}
        assert set(paths) == {"data/reads.csv", "results/out.txt", "notes/a b\nc.md"}
        assert store.get_bytes(paths["results/out.txt"].sha256) == b"42\n"
        assert [(x.path, x.reason) for x in sealed.excluded] == [("results/leak", "symlink")]
        assert sealed.final_message == "see results/out.txt" and sealed.agent_id == "a1"
        with pytest.raises(SandboxGone, match="destroyed"):
            await client.list_files()
        assert service.backends["bubblewrap"].list_live() == []


async def test_restart_reconciles_with_no_leak(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    task = make_task(store, tmp_path)
    assert sandbox_processes(settings) == 0
    first = build(settings, store=store, backends=backends(settings))  # type: ignore[arg-type]
    await first.start()
    for run in ("done", "live"):
        await bus.publish(run_requested(bus, run, task))
    events = await wait_for_events(
        bus, lambda evs: sum(isinstance(e, SandboxReady) for e in evs) == 2
    )
    await first.bus.stop()  # the service goes away with two live sandboxes
    orphan_backend = backends(settings)["bubblewrap"]
    orphan_backend.create(
        SandboxSpec(),
        "orphan",
        {"assay.campaign": "c1", "assay.run": "orphan", "assay.instance": first.instance},
    )
    await bus.publish(finished(bus, "done"))  # finished while no manager was running
    assert {s.sandbox_id for s in orphan_backend.list_live()} == {"done", "live", "orphan"}

    second = build(settings, store=store, backends=backends(settings))  # type: ignore[arg-type]
    await second.start()
    try:
        events = await wait_for_events(
            bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
        )
        [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
        assert sealed.run_id == "done"
        live = {s.sandbox_id for s in second.backends["bubblewrap"].list_live()}
        assert live == {"live"}, (
            "finished runs are sealed and orphans destroyed; live runs are kept"
        )
        client = SandboxClient(bus=bus, instance=second.instance, sandbox_id="live")
        assert (await client.exec("true", timeout_s=10)).exit_code == 0, (
            "the kept sandbox still serves commands"
        )
        await bus.publish(finished(bus, "live"))
        await wait_for_events(
            bus, lambda evs: sum(isinstance(e, ArtifactsSealed) for e in evs) == 2
        )
        # The sandbox goes after its seal is announced: wait for that, not for the event.
        deadline = asyncio.get_running_loop().time() + 30
        while "live" not in second.destroyed:
            assert asyncio.get_running_loop().time() < deadline, "never destroyed"
            await asyncio.sleep(0.05)
        assert second.backends["bubblewrap"].list_live() == []
        assert sandbox_processes(settings) == 0
    finally:
        await second.bus.stop()


async def test_a_flood_of_run_requests_holds_no_more_sandboxes_than_the_limit(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    """A campaign's runs are all requested when its tasks are admitted, whatever the
    runners can drive: a publisher's thousands of tasks made as many idle sandboxes at once
    (995 live for 500 runs in flight at the scale bench). Past `sandbox_max_live` a request
    now waits for a sandbox to go; each run still gets its sandbox and its seal."""
    store = LocalBlobStore(settings.blob_dir)
    task = Task(task_id="t1", prompt="p")
    limited = settings.model_copy(update={"sandbox_max_live": 2})
    service = build(limited, store=store, backends=backends(settings))  # type: ignore[arg-type]
    live = service.backends["bubblewrap"]
    runs = [f"r{i}" for i in range(6)]
    await service.start()
    try:
        for run in runs:
            await bus.publish(run_requested(bus, run, task))

        def ready(evs: list) -> list[str]:  # type: ignore[type-arg]
            return [e.run_id for e in evs if isinstance(e, SandboxReady)]

        events = await wait_for_events(bus, lambda evs: len(ready(evs)) >= 2)
        await asyncio.sleep(2.0)  # time enough for more, were they allowed
        events = [e.event async for e in bus.replay()]
        assert len(ready(events)) == 2 and len(live.list_live()) == 2
        finished_runs: set[str] = set()
        while len(finished_runs) < len(runs):
            for run in ready(events):
                if run not in finished_runs:
                    assert len(live.list_live()) <= 2
                    await bus.publish(finished(bus, run))
                    finished_runs.add(run)
            events = await wait_for_events(
                bus,
                lambda evs: (
                    len(ready(evs)) >= min(len(runs), len(finished_runs) + 1)
                    and sum(isinstance(e, ArtifactsSealed) for e in evs) >= len(finished_runs) - 1
                ),
            )
        events = await wait_for_events(
            bus, lambda evs: sum(isinstance(e, ArtifactsSealed) for e in evs) == len(runs)
        )
        assert sorted(ready(events)) == runs
        # A run's sandbox is destroyed after its seal is published: the last one may be
        # on its way out as its seal arrives (CI met it live at once, 2026-12-05).
        for _ in range(100):
            if not live.list_live():
                break
            await asyncio.sleep(0.1)
        assert live.list_live() == []
    finally:
        await service.bus.stop()


SLOW_WRITE = "echo part > out.txt; sleep 3; echo done >> out.txt"


# A run's end reaching the sandbox-manager while a command still runs in its sandbox.
#
# Seen in the compose campaign (tests/deploy/test_compose_campaign.py): after the stream
# leader's node was killed, a run's SandboxReady was delivered again while a runner still
# drove it, and a second drive's command met the run's end: the sandbox was destroyed
# under it (`OSError: [Errno 9] Bad file descriptor` in the managers' logs, answered as an
# internal error, which an agent reads as a tool error), and a seal copied then could hold
# a file half written. The end stops the command (no logged step can hold it any more; an
# orphan may run until its timeout), answers it "destroyed", and seals after.
async def test_a_runs_end_stops_the_command_running_then_seals(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    task = make_task(store, tmp_path)
    async with bubblewrap_manager(settings, store) as service:
        ready = await request_sandbox(bus, "r1", task)
        client = SandboxClient(bus=bus, instance=ready.instance, sandbox_id=ready.sandbox_id)
        running = asyncio.create_task(client.exec(SLOW_WRITE, timeout_s=20, cwd="/workspace"))
        workspace = service.backends["bubblewrap"].dirs.workspace(ready.sandbox_id)  # type: ignore[attr-defined]
        while not (workspace / "out.txt").exists():
            await asyncio.sleep(0.05)
        await bus.publish(finished(bus, "r1"))  # the run ended by another drive
        with pytest.raises(SandboxGone, match="ended mid-command"):
            await running
        events = await wait_for_events(
            bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
        )
        [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
        out = next(f for f in sealed.files if f.path == "out.txt")
        assert store.get_bytes(out.sha256) == b"part\n"  # stopped before its `done`
        with pytest.raises(SandboxGone, match="destroyed"):
            await client.exec("echo late > late.txt", timeout_s=20, cwd="/workspace")


class HeldDestroy(BubblewrapBackend):
    """Bubblewrap whose destroy waits for `go` once it has begun (`begun`)."""

    def __init__(self, state_dir: Path, seal_dir: Path) -> None:
        super().__init__(state_dir, seal_dir)
        self.begun, self.go = threading.Event(), threading.Event()

    def destroy(self, sandbox_id: str) -> None:
        self.begun.set()
        self.go.wait(30)
        super().destroy(sandbox_id)


@asynccontextmanager
async def held_destroys(
    settings: Settings, store: LocalBlobStore
) -> AsyncIterator[tuple[SandboxService, HeldDestroy]]:
    """A started sandbox-manager whose bubblewrap destroys wait for `go`."""
    state = settings.instance_state
    held = HeldDestroy(state / "bwrap", state / "seals")
    service = build(settings, store=store, backends={"bubblewrap": held})
    await service.start()
    try:
        yield service, held
    finally:
        held.go.set()
        await service.bus.stop()


async def test_a_destroy_cancelled_midway_is_over_when_the_cancel_is(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    """A stop cancels the handler at work; one destroying a sandbox used to return at once
    while the destroy went on in its thread, so a teardown after the stop found the sandbox
    and removed it a second time (dockerd: 409). The cancel now waits for the destroy."""
    store = LocalBlobStore(settings.blob_dir)
    async with held_destroys(settings, store) as (service, held):
        ready = await request_sandbox(bus, "r1", make_task(store, tmp_path))
        destroying = asyncio.create_task(service._destroy(ready.sandbox_id))
        assert await asyncio.to_thread(held.begun.wait, 30)
        destroying.cancel()
        # Let the destroy go on a while after the cancel: it must be over when the cancel is.
        asyncio.get_running_loop().call_later(2.0, held.go.set)
        with pytest.raises(asyncio.CancelledError):
            await destroying
        assert held.list_live() == []


async def test_a_command_while_its_sandbox_is_destroyed_is_told_destroyed(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    """Between dropping a sandbox from those it holds and recording it destroyed, the
    instance knows the sandbox's run ended: a command then is told "destroyed", never
    "unknown" (CI met that window after a seal)."""
    store = LocalBlobStore(settings.blob_dir)
    async with held_destroys(settings, store) as (service, held):
        ready = await request_sandbox(bus, "r1", make_task(store, tmp_path))
        client = SandboxClient(bus=bus, instance=ready.instance, sandbox_id=ready.sandbox_id)
        destroying = asyncio.create_task(service._destroy(ready.sandbox_id))
        assert await asyncio.to_thread(held.begun.wait, 30)
        with pytest.raises(SandboxGone, match="destroyed"):
            await client.exec("echo late > late.txt", timeout_s=20, cwd="/workspace")
        held.go.set()
        await destroying
        with pytest.raises(SandboxGone, match="destroyed"):
            await client.exec("echo later > later.txt", timeout_s=20, cwd="/workspace")
