"""A sandbox-manager that dies for good: the run that ended in its sandbox is declared an
infrastructure failure at the seal by the surviving instance (never while the owner lives),
once, and the owner, should it come back after all, does not seal it any more."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.bus import Bus, Delivery
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_sandbox_manager.failover import SealWatch
from assay_sandbox_manager.handlers import SandboxService
from assay_sandbox_manager.service import build
from assay_schemas import (
    AgentFinished,
    ArtifactsSealed,
    ErrorInfo,
    Event,
    RunFailed,
    SandboxReady,
    same_run,
)
from assay_testing.pipeline import wait_for_events
from tests.sandbox_manager.test_service import (
    backends,
    finished,
    make_task,
    ready_of,
    request_sandbox,
    run_requested,
    sandbox_processes,
)


def _instance(settings: Settings, name: str, store: LocalBlobStore) -> SandboxService:
    mine = settings.model_copy(update={"instance": name})
    service = build(mine, store=store, backends=backends(mine))  # type: ignore[arg-type]
    assert service.seal_watch is not None
    service.seal_watch.interval_s, service.seal_watch.grace_s = 0.2, 1.5
    return service


def _seal_failures(events: list) -> list[RunFailed]:  # type: ignore[type-arg]
    return [e for e in events if isinstance(e, RunFailed) and e.stage == "seal"]


async def test_a_seal_owed_by_a_gone_instance_is_declared_lost_once(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    task = make_task(store, tmp_path)
    services = {name: _instance(settings, name, store) for name in ("a", "b")}
    for service in services.values():
        await service.start()
    stopped: set[str] = set()
    try:
        ready = await request_sandbox(bus, "r1", task)
        owner = ready.instance
        [survivor] = [n for n in services if n != owner]
        watch = services[survivor].seal_watch
        assert watch is not None

        # Alive, the owner is never declared: watched past the grace period, nothing.
        watch.watch(ready, finished(bus, "r1"))
        assert await watch.alive(owner)
        for _ in range(3):
            assert await watch.sweep() == []
        assert watch.owed == 1

        await services[owner].stop()  # gone for good, its sandbox still on its disk
        stopped.add(owner)
        assert not await watch.alive(owner)
        await bus.publish(finished(bus, "r1"))
        events = await wait_for_events(bus, lambda evs: bool(_seal_failures(evs)), timeout=30)
        [lost] = _seal_failures(events)
        assert lost.infrastructure and lost.run_id == "r1"
        assert f"sandbox-manager {owner}" in lost.error and survivor in lost.error
        assert not any(isinstance(e, ArtifactsSealed) for e in events)
        assert watch.owed == 0

        watch.watch(ready_of(events, "r1"), finished(bus, "r1"))
        assert await watch.sweep() == [] and watch.owed == 0, "settled: dropped, not declared"

        # The owner comes back after all: it destroys the sandbox and seals nothing.
        services[owner] = _instance(settings, owner, store)
        await services[owner].start()
        stopped.discard(owner)
        assert services[owner].backends["bubblewrap"].list_live() == []
        events = [e.event async for e in bus.replay()]
        assert len(_seal_failures(events)) == 1
        assert not any(isinstance(e, ArtifactsSealed) for e in events)
        assert sandbox_processes(settings) == 0
    finally:
        for name, service in services.items():
            if name not in stopped:
                await service.stop()


async def _cut_off_after_its_run_ended(
    bus: Bus, settings: Settings, tmp_path: Path
) -> tuple[SandboxService, AgentFinished]:
    """An owner that opened run r1 and was cut off (no consumer, no answer to pings; the
    live run kept) before the run's end, now logged."""
    store = LocalBlobStore(settings.blob_dir)
    owner = _instance(settings, "a", store)
    await owner.start()
    try:
        await bus.publish(run_requested(bus, "r1", make_task(store, tmp_path)))
        await wait_for_events(bus, lambda evs: any(isinstance(e, SandboxReady) for e in evs))
    finally:
        await owner.stop()
    ended = finished(bus, "r1")
    await bus.publish(ended)
    return owner, ended


async def test_an_owner_cut_off_past_the_grace_does_not_seal_what_was_declared_lost(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    """The owner was unreachable (not restarted) while the run ended and a watcher declared
    its seal lost; back on the bus, its consumer hands it the run's end first (the
    declaration is later in the log). It must destroy the sandbox, not seal it."""
    owner, ended = await _cut_off_after_its_run_ended(bus, settings, tmp_path)
    assert "r1" in owner._live and owner.backends["bubblewrap"].list_live() != []
    info = ErrorInfo(error_class="SandboxManagerGone", message="a has not answered for 61 s")
    await bus.publish(
        RunFailed(
            event_id=RunFailed.id_for("r1", "seal"),
            **same_run(ended),
            stage="seal",
            error=info.text,
            error_info=info,
            infrastructure=True,
            producer=bus.producer,
        )
    )

    await owner.bus.connect()  # back: the redelivered end of the run comes first
    try:
        await owner.on_run_ended(ended, Delivery(sequence=0, attempt=2))
    finally:
        await owner.bus.stop()
    events = [e.event async for e in bus.replay()]
    assert not any(isinstance(e, ArtifactsSealed) for e in events)
    assert owner.backends["bubblewrap"].list_live() == []
    assert sandbox_processes(settings) == 0
    assert "r1" not in owner._live


def _declaration(ended: AgentFinished) -> RunFailed:
    info = ErrorInfo(error_class="SandboxManagerGone", message="a has not answered for 61 s")
    return RunFailed(
        event_id=RunFailed.id_for(ended.run_id or "", "seal"),
        **same_run(ended),
        stage="seal",
        error=info.text,
        error_info=info,
        infrastructure=True,
        producer=ended.producer,
    )


def _logged_after_read(
    monkeypatch: pytest.MonkeyPatch,
    reader: Bus,
    bus: Bus,
    event: Event,
    read_name: str = "run_events",
) -> None:
    """`event` is logged (by another instance, on `bus`) just after `reader`'s first read
    (`read_name`) of a run's log: the moment between a decision and its publish."""
    read = getattr(reader, read_name)
    pending = [event]

    async def then_logged(*args: Any, **kwargs: Any) -> Any:
        found = await read(*args, **kwargs)
        if pending:
            await bus.publish(pending.pop())
        return found

    monkeypatch.setattr(reader, read_name, then_logged)


async def test_a_declaration_logged_between_the_owners_read_and_its_seal_refuses_the_seal(
    bus: Bus, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner, back from a partition, reads the run's failures (none yet) and seals; the
    survivor's declaration is logged in between. The seal's publish is refused (it was made
    on condition that the run's RunFailed subject had not changed), the owner reads again,
    finds the declaration and destroys the sandbox: the log holds the run as lost, once."""
    owner, ended = await _cut_off_after_its_run_ended(bus, settings, tmp_path)

    await owner.bus.connect()
    # Its first read is the RunFailed subject's last sequence (empty: nothing else read).
    _logged_after_read(monkeypatch, owner.bus, bus, _declaration(ended), "last_sequence")
    try:
        await owner.on_run_ended(ended, Delivery(sequence=0, attempt=2))
    finally:
        await owner.bus.stop()
    events = [e.event async for e in bus.replay()]
    assert len(_seal_failures(events)) == 1
    assert not any(isinstance(e, ArtifactsSealed) for e in events)
    assert owner.backends["bubblewrap"].list_live() == []
    assert sandbox_processes(settings) == 0


async def test_a_seal_logged_between_the_watchers_read_and_its_declaration_refuses_it(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reverse: the watcher reads the run (no seal), the owner's seal is logged, the
    watcher declares the seal lost. The declaration is refused; the run stays watched until
    the next sweep reads the seal and drops it. Nothing says the sealed run was lost."""
    watch = SealWatch(bus, "b", grace_s=0.0)
    ended = finished(bus, "r1")
    watch.watch(_ready_on(bus, "gone", "r1"), ended)
    sealed = ArtifactsSealed(
        event_id=ArtifactsSealed.id_for("r1"),
        **same_run(ended),
        files=[],
        agent_id="a1",
        epoch=0,
        sandbox_id="r1",
        outcome="finished",
        producer=bus.producer,
    )
    _logged_after_read(monkeypatch, bus, bus, sealed)

    assert await watch.sweep() == [], "refused: not declared"
    assert watch.owed == 1
    assert await watch.sweep() == [] and watch.owed == 0, "the seal read: dropped"
    events = [e.event async for e in bus.replay()]
    assert _seal_failures(events) == []
    assert sum(isinstance(e, ArtifactsSealed) for e in events) == 1


def _ready_on(bus: Bus, instance: str, run_id: str) -> SandboxReady:
    return SandboxReady(
        event_id=SandboxReady.id_for(run_id),
        campaign_id="c1",
        run_id=run_id,
        task_id="t1",
        sandbox_id=run_id,
        backend="bubblewrap",
        instance=instance,
        image_digest="d",
        workspace=[],
        producer=bus.producer,
    )


async def test_a_restarted_watcher_still_watches_what_it_watched(bus: Bus, tmp_path: Path) -> None:
    kept = tmp_path / "state" / "seal-watch.json"
    first = SealWatch(bus, "b", interval_s=0.2, grace_s=1.0, path=kept)
    first.start()
    first.watch(_ready_on(bus, "gone", "r1"), finished(bus, "r1"))
    await first.stop()  # before any sweep could declare it: only the kept file knows
    assert kept.is_file()

    again = SealWatch(bus, "b", interval_s=0.2, grace_s=1.0, path=kept)
    again.start()
    try:
        assert again.owed == 1
        events = await wait_for_events(bus, lambda evs: bool(_seal_failures(evs)), timeout=30)
        [lost] = _seal_failures(events)
        assert lost.run_id == "r1" and "sandbox-manager gone" in lost.error
    finally:
        await again.stop()
    assert again.owed == 0
    # What was settled is not kept: a restart after it watches nothing.
    reread = SealWatch(bus, "b", path=kept)
    reread.load()
    assert reread.owed == 0


async def test_a_damaged_watch_file_costs_only_what_does_not_read(bus: Bus, tmp_path: Path) -> None:
    kept = tmp_path / "seal-watch.json"
    kept.write_text("{not json")
    watch = SealWatch(bus, "b", path=kept)
    watch.load()  # a warning, not a crash
    assert watch.owed == 0

    good = SealWatch(bus, "b", path=kept)
    good.watch(_ready_on(bus, "gone", "r2"), finished(bus, "r2"))
    good.save()
    entries = json.loads(kept.read_text())
    entries += [{"ended": {"event_type": "Nonsense"}, "campaign_id": "c1", "owner": "x"}, 7]
    kept.write_text(json.dumps(entries))
    watch = SealWatch(bus, "b", path=kept)
    watch.load()
    assert watch.owed == 1
