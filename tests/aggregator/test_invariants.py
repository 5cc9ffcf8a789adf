"""The log's invariants (`assay check`, issue #54): clean on a whole campaign, and each
breach planted in a real log is named, on the pure function and on the command."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from assay.bus import Bus
from assay.config import Settings
from assay_aggregator.invariants import check_log
from assay_schemas import (
    AgentFinished,
    ArtifactsSealed,
    Event,
    JudgmentRecorded,
    RunRequested,
    SandboxReady,
)
from assay_testing.synthetic_log import publish_events, synthetic_events

from .conftest import SPEC as BASE
from .conftest import Published, run_cli

SPEC = replace(BASE, n_tasks=3, n_samples=1, steps_per_run=1, infrastructure_failure_rate=0.3)
LATER = timedelta(days=3650)


def _events() -> list[Event]:
    return list(synthetic_events(SPEC))


def _kinds(events: list[Event], **kw: float) -> list[tuple[str, str]]:
    now = max(e.occurred_at for e in events) + LATER
    _, breaches = check_log(enumerate(events, 1), now=now, **kw)
    return [(b.kind, b.run_id) for b in breaches]


def _run_of(events: list[Event], n: int = 0) -> str:
    sealed = [e.run_id for e in events if isinstance(e, ArtifactsSealed)]
    return sealed[n] or ""


def test_a_whole_campaign_is_clean() -> None:
    events = _events()
    assert any(e.event_type == "RunFailed" for e in events)  # failures end runs too
    assert _kinds(events) == []


def test_a_missing_verdict_is_named() -> None:
    events = _events()
    run = _run_of(events)
    gone = next(
        e
        for e in events
        if isinstance(e, JudgmentRecorded) and e.run_id == run and e.judge_id == "judge_b"
    )
    events.remove(gone)
    now = max(e.occurred_at for e in events) + LATER
    _, breaches = check_log(enumerate(events, 1), now=now)
    assert [(b.kind, b.run_id) for b in breaches] == [("verdict_missing", run)]
    assert "judge_b sample 0" in breaches[0].detail


def test_a_run_with_no_end_is_stuck_past_its_wall_clock_and_in_flight_before() -> None:
    events = _events()
    run = _run_of(events)
    events = [e for e in events if e.run_id != run or isinstance(e, RunRequested | SandboxReady)]
    assert _kinds(events) == [("stuck_run", run)]
    request = next(e for e in events if isinstance(e, RunRequested) and e.run_id == run)
    soon = request.occurred_at + timedelta(seconds=request.limits.wall_clock_s)
    _, breaches = check_log(enumerate(events, 1), now=soon)
    assert breaches == []


def test_a_run_queued_while_its_campaign_moves_is_not_stuck() -> None:
    """At a low concurrency a run waits its turn behind its campaign's other runs for
    longer than its wall clock: not stuck while the campaign moves; stuck once it stops."""
    events = _events()
    run = _run_of(events)
    last = max(e.occurred_at for e in events)
    request = next(e for e in events if isinstance(e, RunRequested) and e.run_id == run)
    limit = timedelta(seconds=request.limits.wall_clock_s + 300)
    queued = request.model_copy(update={"occurred_at": last - 3 * limit})
    events = [queued if e is request else e for e in events if e.run_id != run or e is request]
    _, breaches = check_log(enumerate(events, 1), now=last + limit / 2)
    assert breaches == []
    _, breaches = check_log(enumerate(events, 1), now=last + limit * 1.01)
    assert [(b.kind, b.run_id) for b in breaches] == [("stuck_run", run)]
    assert "campaign has not moved" in breaches[0].detail


def test_an_ended_run_never_sealed_may_hold_a_live_sandbox() -> None:
    events = _events()
    run = _run_of(events)
    events = [e for e in events if e.run_id != run or not isinstance(e, ArtifactsSealed)]
    events = [e for e in events if e.run_id != run or not isinstance(e, JudgmentRecorded)]
    assert _kinds(events) == [("unsealed_sandbox", run)]


def test_a_sandbox_made_after_its_run_ended_is_named() -> None:
    events = _events()
    run = _run_of(events)
    ready = next(e for e in events if isinstance(e, SandboxReady) and e.run_id == run)
    events.remove(ready)
    at = next(i for i, e in enumerate(events) if isinstance(e, AgentFinished) and e.run_id == run)
    events.insert(at + 1, ready)
    assert _kinds(events) == [("sandbox_after_end", run)]


def test_a_second_end_is_a_breach() -> None:
    events = _events()
    finish = next(e for e in events if isinstance(e, AgentFinished))
    events.append(finish.model_copy(update={"event_id": "again"}))
    assert _kinds(events) == [("second_end", finish.run_id)]


async def test_assay_check_names_breaches_and_exits_1(
    bus: Bus, published: Published, settings: Settings, tmp_path: Path
) -> None:
    done = run_cli(["check", "--json"], settings, tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["clean"] and doc["breaches"] == [] and doc["runs"] == 30
    finish = next(e for e in published.events if isinstance(e, AgentFinished))
    again = finish.model_copy(update={"event_id": "again"})
    await publish_events(bus.js, bus.subjects, bus.stream.name, [again])
    done = run_cli(["check", "--json"], settings, tmp_path)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert [(b["kind"], b["run_id"]) for b in doc["breaches"]] == [("second_end", finish.run_id)]
    assert f"seq {published.head + 1}" in doc["breaches"][0]["detail"]
    done = run_cli(["check"], settings, tmp_path)
    assert done.returncode == 1 and "second_end" in done.stdout


def test_assay_check_of_a_folder_without_a_log_exits_2(settings: Settings, tmp_path: Path) -> None:
    done = run_cli(["check", "--home", str(tmp_path)], settings, tmp_path)
    assert done.returncode == 2 and "holds no log" in done.stderr
