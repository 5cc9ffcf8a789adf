"""`assay trace`'s waterfall, from logged events: rows that tile the run, and hostile input."""

from __future__ import annotations

import io
import itertools
from datetime import timedelta

import pytest
from rich.console import Console

from assay_cli.waterfall import build_waterfall, print_waterfall, trace_id_of
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    Event,
    RunFailed,
    RunRequested,
    SandboxReady,
)
from assay_testing.synthetic_log import LogSpec, synthetic_events

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def one_run() -> list[Event]:
    """The first run of a small synthetic campaign that was sealed and judged."""
    spec = LogSpec(n_tasks=3, n_agents=1, infrastructure_failure_rate=0.0, steps_per_run=3)
    events = list(synthetic_events(spec))
    run_id = next(e.run_id for e in events if isinstance(e, RunRequested))
    # Its events are a second apart: a step takes 600 ms of that (model, then a tool).
    return [
        e.model_copy(update={"latency_ms": 600.0}) if isinstance(e, AgentStepLogged) else e
        for e in events
        if e.run_id == run_id
    ]


def test_top_rows_tile_the_run_and_children_sit_in_their_step() -> None:
    events = one_run()
    w = build_waterfall(events, TRACE)
    assert w is not None
    times = [e.occurred_at for e in events]
    assert w.wall_ms == pytest.approx((max(times) - min(times)).total_seconds() * 1000)
    top = [r for r in w.rows if r.depth == 0]
    assert w.covered_ms == pytest.approx(w.wall_ms)
    for before, after in itertools.pairwise(top):
        assert after.start_ms == pytest.approx(before.start_ms + before.duration_ms)
    steps = [r for r in top if r.kind == "step"]
    assert len(steps) == 3
    logged = [e for e in events if isinstance(e, AgentStepLogged)]
    for row, step in zip(steps, logged, strict=True):
        assert row.duration_ms == pytest.approx(step.latency_ms)
    assert [r.duration_ms for r in top if r.kind == "wait"][:3] == pytest.approx([400.0] * 3)
    models = [r for r in w.rows if r.kind == "model"]
    assert [r.duration_ms for r in models] == pytest.approx([250.0] * 3)
    tools = [r for r in w.rows if r.kind == "tool"]
    assert [r.duration_ms for r in tools] == [350.0] * 3
    judgments = [r for r in w.rows if r.kind == "judgment"]
    assert {r.name for r in judgments} == {"judgment judge_a", "judgment judge_b", "judgment rules"}
    assert not w.warnings

    out = io.StringIO()
    print_waterfall(w, Console(file=out, width=200))
    text = out.getvalue()
    assert f"trace id {TRACE}" in text and "model call" in text and "seal artifacts" in text


def test_a_redelivered_event_counts_once() -> None:
    events = one_run()
    once = build_waterfall(events, None)
    twice = build_waterfall([*events, *events], None)
    assert once is not None and twice is not None
    assert twice.rows == once.rows


def test_times_from_a_skewed_clock_are_clamped_with_a_warning() -> None:
    events = one_run()
    requested = next(e for e in events if isinstance(e, RunRequested))
    skewed = [
        e.model_copy(update={"occurred_at": requested.occurred_at - timedelta(minutes=5)})
        if isinstance(e, SandboxReady)
        else e
        for e in events
    ]
    w = build_waterfall(skewed, None)
    assert w is not None
    [sandbox] = [r for r in w.rows if r.kind == "sandbox"]
    assert sandbox.duration_ms == 0 and sandbox.start_ms == 0
    assert any("sandbox create" in warning for warning in w.warnings)
    assert w.covered_ms == pytest.approx(w.wall_ms)
    assert all(r.duration_ms >= 0 for r in w.rows)


def test_a_run_never_requested_has_no_waterfall() -> None:
    events = [e for e in one_run() if not isinstance(e, RunRequested)]
    assert build_waterfall(events, None) is None


@pytest.mark.parametrize(
    ("header", "trace_id"),
    [
        (f"00-{TRACE}-00f067aa0ba902b7-01", TRACE),
        (f"00-{'0' * 32}-00f067aa0ba902b7-01", None),  # the invalid all-zero id
        (f"01-{TRACE}-00f067aa0ba902b7-01", None),
        (f"00-{TRACE.upper()}-00f067aa0ba902b7-01", None),
        (f"00-{TRACE}-00f067aa0ba902b7-01" + "x" * 1_000_000, None),
        ("", None),
    ],
)
def test_trace_id_comes_only_from_a_well_formed_traceparent(
    header: str, trace_id: str | None
) -> None:
    assert trace_id_of({"traceparent": header}) == trace_id
    assert trace_id_of({}) is None


def test_the_waterfall_reads_the_run_as_its_one_fold_does() -> None:
    """Issue #54: the seal it shows is the one `RunHistory` and the aggregator keep (the
    last), a second end of the run is not drawn, and a failure stays after a seal."""
    events = one_run()
    seal = next(e for e in events if isinstance(e, ArtifactsSealed))
    finish = next(e for e in events if isinstance(e, AgentFinished))
    again = seal.model_copy(
        update={
            "event_id": "reseal",
            "files": seal.files[:1],
            "occurred_at": seal.occurred_at + timedelta(seconds=1),
        }
    )
    twice = finish.model_copy(update={"event_id": "again", "stop_reason": "max_steps"})
    at = events.index(seal)
    w = build_waterfall([*events[:at], twice, seal, again, *events[at + 1 :]], TRACE)
    assert w is not None
    assert [r.detail for r in w.rows if r.kind == "seal"] == ["1 file(s)"]
    assert [r.detail for r in w.rows if r.name == "agent finished"] == ["stop: submitted"]
    failed = RunFailed(
        event_id="unreachable",
        campaign_id=finish.campaign_id,
        run_id=finish.run_id,
        task_id=finish.task_id,
        producer=finish.producer,
        stage="agent",
        error="ProviderUnreachable: connection refused",
        infrastructure=True,
        occurred_at=finish.occurred_at,
    )
    w = build_waterfall([failed if e is finish else e for e in events], TRACE)
    assert w is not None
    kinds = [r.kind for r in w.rows if r.depth == 0]
    assert "failed" in kinds and kinds.index("failed") < kinds.index("seal")
    assert not [r for r in w.rows if r.name == "agent finished"]
