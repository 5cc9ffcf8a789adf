"""Incremental reports: a snapshot plus the events after it gives the full rebuild's report,
byte for byte, wherever the snapshot was cut, refused messages on both sides of the cut
included (the counting rule decides from what the snapshot carries: ids seen, verdicts recorded,
submissions refused). A snapshot that does not fit is ignored, never trusted."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay_aggregator.rebuild import fold_stream
from assay_aggregator.snapshot import load_snapshot, paths_for, resume_state, save_snapshot
from assay_report.projections import Projections
from assay_report.report import build_report, report_json
from assay_report.state import SNAPSHOT_VERSION, State, StoppingRecord, state_to_json
from assay_schemas import (
    DimensionScore,
    Event,
    FileRef,
    JudgmentRecorded,
    RunRequested,
    Task,
    TaskSubmitted,
)

from .conftest import SPEC, Published, publish

RESAMPLES = 200


def _report(state: State) -> bytes:
    return report_json(build_report(Projections(state), n_resamples=RESAMPLES))


async def _raw(bus: Bus, event: Event, msg_id: str) -> int:
    """Publish `event` under its own subject with any message id; its sequence."""
    data = event.model_dump_json().encode()
    ack = await bus.js.publish(
        bus.subjects.of(event), data, stream=bus.stream.name, headers={"Nats-Msg-Id": msg_id}
    )
    return int(ack.seq)


async def _garbage(bus: Bus, like: Event, tag: str) -> int:
    ack = await bus.js.publish(
        bus.subjects.of(like),
        b"\x00not an event " + tag.encode(),
        stream=bus.stream.name,
        headers={"Nats-Msg-Id": f"garbage-{tag}"},
    )
    return int(ack.seq)


async def _hostile_log(bus: Bus, published: Published) -> tuple[list[int], list[int]]:
    """Refused messages before and after where the snapshots are cut, and clean events
    between them; returns (refused sequences, cut points)."""
    events = published.events
    verdict = next(e for e in events if isinstance(e, JudgmentRecorded) and e.scores)
    submitted = next(e for e in events if isinstance(e, TaskSubmitted))
    request = next(e for e in events if isinstance(e, RunRequested))
    task = Task(
        task_id="outside",
        prompt="p",
        attachments=[FileRef(path="../outside.csv", sha256="0" * 64, size=1)],
    )
    refused = [
        # A submission the counting rule refuses, and an undecodable message.
        await _raw(
            bus,
            submitted.model_copy(
                update={"event_id": "outside", "task_id": "outside", "task": task}
            ),
            "outside",
        ),
        await _garbage(bus, verdict, "a"),
    ]
    cut = published.head + len(refused)
    more = await publish(bus, dataclasses.replace(SPEC, campaign_id="camp2", n_tasks=3, seed=7))
    where = {"run_id": "outside-run", "task_id": "outside"}
    second = {k: DimensionScore(score=10) for k in verdict.scores}
    refused += [
        # After the cut, each refused only for what the snapshot remembers: the refused
        # submission's run and its verdict, a second verdict for a recorded sample, an
        # event id already folded from another message; and garbage again.
        await _raw(
            bus,
            request.model_copy(
                update={**where, "event_id": "outside-rq", "task": task, "causation_id": "outside"}
            ),
            "outside-rq",
        ),
        await _raw(bus, verdict.model_copy(update={**where, "event_id": "outside-v"}), "outside-v"),
        await _raw(
            bus, verdict.model_copy(update={"event_id": "second", "scores": second}), "second"
        ),
        await _raw(bus, verdict, "the same event again"),
        await _garbage(bus, verdict, "b"),
    ]
    head = cut + len(more) + 5
    return refused, [1, published.head // 2, published.head, cut, cut + len(more), head - 1, head]


async def test_a_report_from_any_snapshot_equals_the_full_rebuild(
    bus: Bus, settings: Settings, published: Published
) -> None:
    refused, cuts = await _hostile_log(bus, published)
    full = await fold_stream(bus.js, bus.stream.name, bus.subjects.events)
    assert sorted(full.refused) == refused
    assert full.last_sequence == cuts[-1]
    want = _report(full)
    assert json.loads(want)["refused"], "the report lists what it refused"
    for cut in cuts:
        save_snapshot(
            settings, await fold_stream(bus.js, bus.stream.name, bus.subjects.events, until=cut)
        )
        resumed = await resume_state(bus.js, settings)
        assert resumed is not None and resumed.last_sequence == cut
        assert resumed.frame_cache is not None, "the verdict tables load with the snapshot"
        caught_up = await fold_stream(bus.js, bus.stream.name, bus.subjects.events, state=resumed)
        assert caught_up.applied == full.applied, cut
        assert state_to_json(caught_up) == state_to_json(full), cut
        assert _report(caught_up) == want, cut


async def _snapshot_at(bus: Bus, settings: Settings, until: int | None = None) -> State:
    state = await fold_stream(bus.js, bus.stream.name, bus.subjects.events, until=until)
    save_snapshot(settings, state)
    return state


def _rewrite(settings: Settings, old: bytes, new: bytes, *, header: bool) -> None:
    path = paths_for(settings).snapshot
    head, body = path.read_bytes().split(b"\n", 1)
    if header:
        head = head.replace(old, new, 1)
    else:
        body = body.replace(old, new, 1)
    path.write_bytes(head + b"\n" + body)


async def test_a_snapshot_that_does_not_fit_is_ignored(
    bus: Bus, settings: Settings, published: Published, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "assay.aggregator.snapshot")
    state = await _snapshot_at(bus, settings, published.head // 2)
    assert (await resume_state(bus.js, settings)) is not None

    # One score changed in the state: its bytes no longer match the header's hash.
    _rewrite(settings, b'"agent_0"', b'"agent_9"', header=False)
    assert load_snapshot(settings) is None and "do not match its hash" in caplog.text
    # Another layout version, even with a matching hash.
    save_snapshot(settings, state)
    current = f'"snapshot_version":{SNAPSHOT_VERSION}'.encode()
    _rewrite(settings, current, b'"snapshot_version":4', header=True)
    assert load_snapshot(settings) is None and "of version 4" in caplog.text
    # Not a snapshot at all, and a truncated one.
    paths_for(settings).snapshot.write_bytes(b"{" * 10_000)
    assert load_snapshot(settings) is None and "no header line" in caplog.text
    save_snapshot(settings, state)
    data = paths_for(settings).snapshot.read_bytes()
    paths_for(settings).snapshot.write_bytes(data[: len(data) // 2])
    assert load_snapshot(settings) is None

    # Another stream's settings do not read it; a snapshot ahead of the stream is dropped.
    save_snapshot(settings, state)
    other = settings.model_copy(update={"subject_prefix": "other"})
    assert load_snapshot(other) is None
    ahead = dataclasses.replace(state, last_sequence=published.head + 100)
    save_snapshot(settings, ahead)
    assert load_snapshot(settings) is not None
    assert (await resume_state(bus.js, settings)) is None and "ahead of the stream" in caplog.text


async def test_a_stream_made_again_does_not_take_the_old_snapshot(
    bus: Bus, settings: Settings, published: Published, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "assay.aggregator.snapshot")
    await _snapshot_at(bus, settings)
    await bus.js.delete_stream(bus.stream.name)
    async with Bus(settings, service="test") as again:
        await publish(again, dataclasses.replace(SPEC, n_tasks=4, seed=9))
        assert (await resume_state(again.js, settings)) is None
        assert "was made again" in caplog.text


def test_a_snapshot_orjson_refuses_is_read_by_json(settings: Settings) -> None:
    """NaN and integers past 64 bits are what ``json.dumps`` writes and orjson will not
    read: such a snapshot still loads, equal to the state saved."""
    scored: list[list[Any]] = [[1, "r", "a", "t", float("nan"), 2**70]]
    state = State(last_sequence=3, stopping={"c": StoppingRecord("c", scored=scored)})
    save_snapshot(settings, state)
    loaded = load_snapshot(settings)
    assert loaded is not None and loaded.stopping["c"].scored[0][5] == 2**70
    odd = loaded.stopping["c"].scored[0][4]
    assert odd != odd  # NaN
    assert json.dumps(state_to_json(loaded)) == json.dumps(state_to_json(state))
