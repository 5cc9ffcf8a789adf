"""The live aggregator: durable consumer, snapshot + restart, replay --verify."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_aggregator.rebuild import fold_stream
from assay_aggregator.service import build
from assay_aggregator.snapshot import load_snapshot, paths_for
from assay_aggregator.verify import ReportParams, verify
from assay_report.projections import Projections
from assay_schemas import ArtifactsSealed, Event, FileRef, SealManifest
from assay_testing.synthetic_log import LogSpec, publish_events, synthetic_events

from .conftest import SPEC, Published, publish, run_cli

RESAMPLES = 200


async def _live_until(settings: Settings, head: int) -> None:
    """Run a live aggregator until it has folded `head`, then stop it (snapshot + report)."""
    service = build(settings, n_resamples=RESAMPLES)
    service.flush_interval_s = 0.2
    await service.start()
    try:
        await service.wait_for(head, timeout=30)
    finally:
        await service.stop()


async def test_restart_continues_from_the_snapshot_and_equals_a_rebuild(
    bus: Bus, settings: Settings, published: Published
) -> None:
    await _live_until(settings, published.head)
    snap = load_snapshot(settings)
    assert snap is not None and snap.last_sequence == published.head
    more = await publish(bus, dataclasses.replace(SPEC, campaign_id="camp2", n_tasks=3, seed=4))
    head = published.head + len(more)

    service = build(settings, n_resamples=RESAMPLES, write_report=False)
    await service.start()
    try:
        # The catch-up folded exactly the events after the snapshot, nothing twice.
        assert service.state.applied == snap.applied + len(more)
        await service.wait_for(head)
        await asyncio.sleep(0.3)  # let the durable consumer redeliver what it had not acked
        assert service.state.applied == head
        live = Projections(service.state).tables()
    finally:
        await service.stop()
    fresh = Projections(await fold_stream(bus.js, bus.stream.name, bus.subjects.events)).tables()
    for name in fresh:
        assert live[name].equals(fresh[name]), name


async def test_replay_verify_is_identical_after_a_live_run(
    bus: Bus, settings: Settings, published: Published
) -> None:
    await _live_until(settings, published.head)
    assert paths_for(settings).report.exists()
    await publish(bus, LogSpec(campaign_id="late", n_tasks=2, n_agents=2, seed=5))
    results = await verify(settings, ReportParams(n_resamples=RESAMPLES))
    assert [r.name for r in results if not r.identical] == []
    names = [r.name for r in results]
    assert any(n.startswith("live report file @") for n in names)
    assert sum(n.startswith("table ") for n in names) == 11


async def test_replay_verify_cli_reports_a_difference(
    settings: Settings, published: Published, tmp_path: Path
) -> None:
    await _live_until(settings, published.head)
    ok = await asyncio.to_thread(run_cli, ["replay", "--verify"], settings, tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "identical" in ok.stdout
    report = paths_for(settings).report
    report.chmod(0o644)
    report.write_bytes(report.read_bytes().replace(b'"scripted": true', b'"scripted": false'))
    bad = await asyncio.to_thread(run_cli, ["replay", "--verify"], settings, tmp_path)
    assert bad.returncode == 1
    assert "differs" in bad.stdout and "scripted" in bad.stdout


async def test_live_snapshots_are_paced_by_what_they_cost(
    settings: Settings, published: Published
) -> None:
    """While events stream in, a snapshot is not dumped again until the CPU spent since the
    last one is many times what that one took; a quiet log (or a stop) writes it at once."""
    service = build(settings, n_resamples=RESAMPLES, write_report=False)
    await service.catch_up()
    try:
        service.flush(report=False, live=True)  # never written yet: due
        snap = load_snapshot(settings)
        assert snap is not None and snap.last_sequence == published.head
        service._save_cost_s = 3600.0  # as if dumping the state had taken an hour of CPU
        service.state.refuse(published.head + 1, "assay.ev.x", "a later event")
        service.flush(report=False, live=True)
        snap = load_snapshot(settings)
        assert snap is not None and snap.last_sequence == published.head
        service.flush(report=False, live=False)
        snap = load_snapshot(settings)
        assert snap is not None and snap.last_sequence == published.head + 1
    finally:
        await service.bus.stop()


def _manifest_as_blob(event: Event, store: LocalBlobStore) -> Event:
    """A seal as the sandbox-manager logs it when its manifest is too large to inline."""
    if not isinstance(event, ArtifactsSealed) or not event.files:
        return event
    manifest = SealManifest(files=event.files, excluded=event.excluded)
    info = store.put_bytes(manifest.model_dump_json().encode())
    ref = FileRef(
        path="seal-manifest.json", sha256=info.sha256, size=info.size, media_type="application/json"
    )
    update = {"files": [], "excluded": [], "manifest": ref, "file_count": len(event.files)}
    return event.model_copy(update=update)


async def test_seal_manifests_stored_as_blobs_count_live_and_in_replay_verify(
    bus: Bus, settings: Settings
) -> None:
    """The live aggregator as `assay serve aggregator` builds it (no store handed over) and
    both folds of `replay --verify` read a seal's manifest blob from the configured store."""
    store = LocalBlobStore(settings.blob_dir)
    spec = LogSpec(campaign_id="blobs", n_tasks=3, n_agents=2, seed=6, empty_artifact_rate=0.0)
    inline = list(synthetic_events(spec, store=store))
    events = [_manifest_as_blob(e, store) for e in inline]
    n_files = sum(len(e.files) for e in inline if isinstance(e, ArtifactsSealed))
    assert n_files > 0 and events != inline
    await publish_events(bus.js, bus.subjects, bus.stream.name, events)
    await _live_until(settings, len(events))
    snap = load_snapshot(settings)
    assert snap is not None
    assert Projections(snap).tables()["artifacts"].height == n_files
    results = await verify(settings, ReportParams(n_resamples=RESAMPLES))
    assert [r.diff for r in results if not r.identical] == []
