"""One run lifecycle (issue #54): a seal after a failure keeps the failure, and a second end
of a run is refused like a second verdict, in every reader of the report."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from rich.console import Console

from assay_aggregator import fold
from assay_report import Projections
from assay_report.html import render_html
from assay_report.report import build_report, report_json
from assay_report.terminal import print_report
from assay_schemas import (
    AgentFinished,
    ArtifactsSealed,
    ErrorInfo,
    Event,
    JudgmentRecorded,
    RunFailed,
    RunRequested,
)
from assay_testing.synthetic_log import synthetic_events

from .conftest import SPEC as BASE

SPEC = replace(BASE, n_tasks=3, n_samples=1, steps_per_run=2, infrastructure_failure_rate=0.0)


def _unreachable(finish: AgentFinished) -> RunFailed:
    """The run's model server could not be reached: the runner's infrastructure failure."""
    info = ErrorInfo(error_class="ProviderUnreachable", message="connection refused")
    return RunFailed(
        event_id=RunFailed.id_for(finish.run_id, "agent"),
        campaign_id=finish.campaign_id,
        run_id=finish.run_id,
        task_id=finish.task_id,
        producer=finish.producer,
        stage="agent",
        error=info.text,
        error_info=info,
        infrastructure=True,
    )


def failed_then_sealed() -> tuple[list[Event], str, int]:
    """The synthetic campaign with one run failed by its model server, its files sealed
    afterwards (the sandbox-manager seals every run that ends); that run, and the length
    of the log before its seal."""
    events = list(synthetic_events(SPEC))
    victim = next(e for e in events if isinstance(e, RunRequested)).run_id or ""
    out: list[Event] = []
    before_seal = 0
    for e in events:
        if e.run_id == victim and isinstance(e, AgentFinished):
            out.append(_unreachable(e))
        elif e.run_id == victim and isinstance(e, ArtifactsSealed):
            before_seal = len(out)
            out.append(e.model_copy(update={"outcome": "failed"}))
        elif e.run_id == victim and isinstance(e, JudgmentRecorded):
            continue  # a failed run is not judged
        else:
            out.append(e)
    return out, victim, before_seal


def _doc(events: list[Event]) -> dict[str, Any]:
    state = fold(enumerate(events, 1))
    doc: dict[str, Any] = json.loads(report_json(build_report(Projections(state), n_resamples=50)))
    return doc


def _agent_of(events: list[Event], run_id: str) -> str:
    return next(
        e.agent.agent_id for e in events if isinstance(e, RunRequested) and e.run_id == run_id
    )


def test_a_seal_after_an_infrastructure_failure_keeps_the_failure() -> None:
    events, victim, before_seal = failed_then_sealed()
    agent = _agent_of(events, victim)
    state = fold(enumerate(events, 1))
    p = Projections(state)
    row = p.table("runs").filter(run_id=victim).row(0, named=True)
    assert (row["state"], row["infrastructure_failure"], row["failure_stage"]) == (
        "failed",
        True,
        "agent",
    )
    assert row["sealed"] and not row["empty_artifacts"]  # the files are kept, as evidence
    report = build_report(p, n_resamples=50)
    doc = json.loads(report_json(report))
    assert doc["infrastructure_failures"] == [{"agent_id": agent, "stage": "agent", "n_runs": 1}]
    assert {s["state"]: s["n_runs"] for s in doc["run_states"]}["failed"] == 1
    declared = {a["agent_id"]: a for a in doc["agents"]}[agent]
    assert declared["n_infrastructure_failures"] == 1
    # The cost tables leave it out, as they leave out every infrastructure failure.
    costs = {c["agent_id"]: c for c in doc["statistics"]["agent_costs"]}
    assert costs[agent]["n_runs"] == SPEC.n_tasks - 1
    console = Console(record=True, width=200)
    print_report(report, console)
    text = console.export_text()
    assert "ProviderUnreachable" in text and "failed 1" in text
    assert "ProviderUnreachable" in render_html(report)

    # The report taken before the seal (what `assay run` printed) says the same.
    early = _doc([*events[:before_seal], *events[before_seal + 1 :]])
    late = _doc(events)
    for key in ("infrastructure_failures", "run_states", "agents"):
        assert early[key] == late[key], key
    assert early["statistics"]["agent_costs"] == late["statistics"]["agent_costs"]


def test_an_agent_failure_sealed_afterwards_stays_the_agents() -> None:
    events, victim, _ = failed_then_sealed()
    events = [
        e.model_copy(update={"infrastructure": False}) if isinstance(e, RunFailed) else e
        for e in events
    ]
    row = (
        Projections(fold(enumerate(events, 1)))
        .table("runs")
        .filter(run_id=victim)
        .row(0, named=True)
    )
    assert (row["state"], row["infrastructure_failure"]) == ("failed", False)


def test_a_second_agent_finished_is_refused_and_listed() -> None:
    events = list(synthetic_events(SPEC))
    at, first = next((i, e) for i, e in enumerate(events) if isinstance(e, AgentFinished))
    again = first.model_copy(
        update={"event_id": "runner-again", "stop_reason": "max_steps", "cost_usd": 99.0}
    )
    hostile = [*events[: at + 1], again, *events[at + 1 :]]
    state = fold(enumerate(hostile, 1))
    assert [(r.sequence, r.subject) for r in state.refused.values()] == [
        (at + 2, f"ev.AgentFinished.{first.campaign_id}.{first.run_id}")
    ]
    reason = state.refused[at + 2].reason
    assert f"second end of run {first.run_id}" in reason and f"seq {at + 1}" in reason
    assert state.runs[first.run_id or ""].stop_reason == "submitted"
    doc, clean = _doc(hostile), _doc(events)
    assert [r["sequence"] for r in doc["refused"]] == [at + 2]
    for key in ("refused", "log_sequence"):
        doc.pop(key), clean.pop(key)
    assert doc == clean


def test_an_end_after_a_failure_is_refused() -> None:
    events, victim, _ = failed_then_sealed()
    finish = next(
        e for e in synthetic_events(SPEC) if isinstance(e, AgentFinished) and e.run_id == victim
    )
    at = next(i for i, e in enumerate(events) if isinstance(e, RunFailed))
    hostile = [*events[: at + 1], finish, *events[at + 1 :]]
    state = fold(enumerate(hostile, 1))
    assert list(state.refused) == [at + 2]
    assert "second end" in state.refused[at + 2].reason
    run = state.runs[victim]
    assert (run.phase, run.finished, run.infrastructure_failure) == ("failed", False, True)
