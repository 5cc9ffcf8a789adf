"""Nothing ends without an event (issue #54): a run every delivery of which fails, or that
nobody drives past its wall-clock limit, is ended with RunFailed and its sandbox destroyed."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.providers import ModelProvider
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_sandbox_manager.backends import BubblewrapBackend
from assay_schemas import (
    AgentSpec,
    ArtifactsSealed,
    Event,
    Limits,
    RunFailed,
    SandboxReady,
    SandboxSpec,
)
from assay_testing.events import run_requested
from assay_testing.pipeline import campaign, scripted_agent, services, wait_for_events, write_task
from tests.frozen import FrozenInstance


class BrokenFactory(RuntimeError):
    """The runner cannot make a model client: every delivery of the run fails."""


def broken_providers(agent: AgentSpec) -> ModelProvider:
    raise BrokenFactory(f"no client for {agent.model}")


def sandbox_processes(settings: Settings) -> int:
    """Processes whose command line names this test's sandbox state (bwrap, its helper)."""
    out = subprocess.run(
        ["pgrep", "-c", "-f", str(settings.state_dir)], capture_output=True, text=True
    )
    return int(out.stdout.strip() or 0)


T = TypeVar("T")


def given_up(events: list[Event]) -> RunFailed:
    """The run's end: given up by the runner (an infrastructure failure at the agent stage),
    caused by the SandboxReady it could not drive."""
    [ready] = [e for e in events if isinstance(e, SandboxReady)]
    [failed] = [e for e in events if isinstance(e, RunFailed)]
    assert (failed.stage, failed.infrastructure) == ("agent", True)
    assert failed.causation_id == ready.event_id
    assert failed.error_info is not None and failed.error_info.error_class == "RunGivenUp"
    return failed


async def until(read: Callable[[], Awaitable[T]], timeout: float = 15.0) -> T:
    """The first truthy value `read` gives within `timeout` (the last one otherwise)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not (value := await read()) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
    return value


async def destroyed(backend: BubblewrapBackend) -> bool:
    return await asyncio.to_thread(backend.list_live) == []


async def none_left(settings: Settings) -> bool:
    # Killed processes leave the process table only once they have exited: a loaded
    # host may take a moment.
    return await asyncio.to_thread(sandbox_processes, settings) == 0


async def test_a_dead_lettered_sandbox_ready_ends_the_run_and_destroys_its_sandbox(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    folder = write_task(tmp_path / "tasks", "t1", "go", {"a.txt": "x"})
    spec = campaign("c1", [scripted_agent("a1", "m", "http://127.0.0.1:9/v1")])
    async with services(settings, store, providers=broken_providers) as started:
        await submit_campaign(bus, store, spec, load_tasks(folder, max_bytes=1000))
        events = await wait_for_events(
            bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
        )
        backend = started["sandbox-manager"].backends["bubblewrap"]
        # Destroyed right after the seal is announced.
        gone = await until(lambda: destroyed(backend))
        # Dead-lettered right after the RunFailed is published: the seal may come first.
        letters = await until(lambda: bus.dead_letters("runner-runs"))
    failed = given_up(events)
    assert f"after {settings.max_deliver} deliveries" in failed.error
    assert "BrokenFactory" in failed.error
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
    assert sealed.outcome == "failed"
    assert len(letters) == 1, "the SandboxReady is still dead-lettered, as evidence"
    assert gone, "the sandbox is destroyed"
    assert await until(lambda: none_left(settings)), "the sandbox's processes are gone"


async def test_a_run_requested_no_instance_can_open_ends_with_a_sandbox_failure(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    """A RunRequested that fails on every delivery (here: a backend this instance lacks,
    refused before any sandbox is made) is no longer left without an end."""
    store = LocalBlobStore(settings.blob_dir)
    request = run_requested(sandbox=SandboxSpec(backend="docker"), producer=bus.producer)
    async with services(settings, store, names=("sandbox-manager",)):
        await bus.publish(request)
        events = await wait_for_events(bus, lambda evs: any(isinstance(e, RunFailed) for e in evs))
    [failed] = [e for e in events if isinstance(e, RunFailed)]
    assert (failed.stage, failed.infrastructure) == ("sandbox", True)
    assert failed.error_info is not None and failed.error_info.error_class == "SandboxGivenUp"
    assert "not enabled" in failed.error and "RunRequested" in failed.error
    assert not any(isinstance(e, SandboxReady) for e in events)


async def test_a_run_nobody_drives_past_its_wall_clock_is_ended_and_its_sandbox_destroyed(
    bus: Bus, settings: Settings
) -> None:
    """No runner ever takes the run (gone for good): past its wall-clock limit and the
    grace, the sandbox-manager that holds its sandbox ends it."""
    from assay_sandbox_manager.service import build

    store = LocalBlobStore(settings.blob_dir)
    state = settings.instance_state
    backend = BubblewrapBackend(state / "bwrap", state / "seals")
    service = build(settings, store=store, backends={"bubblewrap": backend})
    service.overdue_grace_s, service.overdue_check_s = 1.0, 0.5
    request = run_requested(
        limits=Limits(wall_clock_s=2), sandbox=SandboxSpec(memory_mb=512), producer=bus.producer
    )
    await service.start()
    try:
        await bus.publish(request)
        events = await wait_for_events(
            bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
        )
        gone = await until(lambda: destroyed(backend))
    finally:
        await service.stop()
    [ready] = [e for e in events if isinstance(e, SandboxReady)]
    [failed] = [e for e in events if isinstance(e, RunFailed)]
    assert (failed.stage, failed.infrastructure) == ("agent", True)
    assert failed.error_info is not None and failed.error_info.error_class == "RunOverdue"
    assert (failed.occurred_at - ready.occurred_at).total_seconds() >= 3, "not before its time"
    assert gone, "the sandbox is destroyed"
    assert await until(lambda: none_left(settings)), "the sandbox's processes are gone"


async def test_a_sandbox_ready_whose_last_delivery_is_lost_ends_the_run(
    settings: Settings,
) -> None:
    """A runner instance paused past the ack wait on the run's last delivery (SIGSTOP, or
    killed) leaves nothing to redeliver: JetStream's advisory reaches the other runner,
    which ends the run with RunFailed; the sandbox-manager seals and destroys it."""
    quick = settings.model_copy(update={"ack_wait_s": 2.0, "max_deliver": 1})
    store = LocalBlobStore(quick.blob_dir)
    request = run_requested(sandbox=SandboxSpec(memory_mb=512))
    paused = FrozenInstance(
        quick,
        durable="runner-runs",
        subject=lambda b: b.subjects.event("SandboxReady"),
        event_type=SandboxReady,
    )
    async with (
        Bus(quick, service="test") as bus,
        paused,
        services(quick, store, names=("sandbox-manager",)) as started,
    ):
        await bus.publish(request)
        await paused.until_frozen()
        async with services(quick, store, names=("runner",), providers=broken_providers):
            events = await wait_for_events(
                bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs), timeout=60
            )
            backend = started["sandbox-manager"].backends["bubblewrap"]
            gone = await until(lambda: destroyed(backend))
            letters = await until(lambda: bus.dead_letters("runner-runs"))
    failed = given_up(events)
    assert "last delivery lost: 1 deliveries" in failed.error
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
    assert sealed.outcome == "failed"
    assert len(letters) == 1, "the SandboxReady is dead-lettered, as evidence"
    assert paused.attempts == [1], "JetStream never delivered it again"
    assert gone, "the sandbox is destroyed"
