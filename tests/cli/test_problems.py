"""One campaign fold, every reader: a planted log with an infrastructure failure, an agent
failure, a failed judgment, a missing verdict and a refused failure. The campaign fold's
answers, `assay watch`'s progress and the report's problems section agree, the refused
event counts in none of them, and a fresh replay rebuilds the same problems section."""

from __future__ import annotations

import json
from dataclasses import replace

from rich.console import Console

from assay.bus import Bus
from assay_aggregator.rebuild import fold_stream
from assay_cli.problems import problems_of
from assay_cli.progress import Progress
from assay_report.html import render_html
from assay_report.projections import Projections
from assay_report.report import Report, build_report, report_json
from assay_report.state import state_from_json, state_to_json
from assay_report.terminal import print_report
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignHistory,
    ErrorInfo,
    Event,
    JudgmentFailed,
    JudgmentRecorded,
    Producer,
    RunFailed,
    RunRequested,
    SandboxReady,
)
from assay_testing.synthetic_log import publish_events, synthetic_events
from tests.aggregator.conftest import SPEC as BASE

# The fixtures' campaign (3 agents), smaller and with nothing failing but what is planted.
SPEC = replace(BASE, n_tasks=3, n_samples=1, steps_per_run=1, infrastructure_failure_rate=0.0)
RUNNER = Producer(service="runner", version="0")
_AFTER_SANDBOX = (AgentStepLogged, AgentFinished, ArtifactsSealed, JudgmentRecorded)


def _failed(request: RunRequested, stage: str, cls: str, infrastructure: bool) -> RunFailed:
    return RunFailed(
        event_id=f"failed-{request.run_id}",
        campaign_id=request.campaign_id,
        run_id=request.run_id,
        task_id=request.task_id,
        producer=RUNNER,
        stage=stage,
        error=f"{cls}: it broke",
        error_info=ErrorInfo(error_class=cls, message="it broke"),
        infrastructure=infrastructure,
    )


def _judgment_failed(v: JudgmentRecorded, event_id: str, sample: int) -> JudgmentFailed:
    return JudgmentFailed(
        event_id=event_id,
        campaign_id=v.campaign_id,
        run_id=v.run_id,
        task_id=v.task_id,
        producer=v.producer,
        judge_id=v.judge_id,
        sample=sample,
        error="ProviderError: 503",
        error_info=ErrorInfo(error_class="ProviderError", message="503"),
        attempts=3,
        infrastructure=True,
    )


def planted() -> tuple[list[Event], str]:
    """The log, and the id of the one event the counting rule refuses (a failure past the samples)."""
    events = list(synthetic_events(SPEC))
    requests = [e for e in events if isinstance(e, RunRequested)]
    infra, agent, judged, missing, other = (r.run_id for r in requests[:5])
    out: list[Event] = []
    for e in events:
        verdict = e if isinstance(e, JudgmentRecorded) else None
        if e.run_id == infra and isinstance(e, (SandboxReady, *_AFTER_SANDBOX)):
            continue  # no sandbox could be made: nothing after it
        if e.run_id == agent and isinstance(e, (AgentFinished, JudgmentRecorded)):
            continue  # the agent crashed after its step
        if e.run_id == agent and isinstance(e, ArtifactsSealed):
            # What it left is sealed all the same (its run owes no verdict).
            e = e.model_copy(update={"outcome": "failed", "final_message": ""})
        if verdict is not None and e.run_id == judged and verdict.judge_id == "judge_a":
            out.append(_judgment_failed(verdict, "judge-gave-up", verdict.sample))
            continue
        if verdict is not None and e.run_id == missing and verdict.judge_id == "judge_b":
            continue  # never came
        out.append(e)
        if isinstance(e, RunRequested) and e.run_id == infra:
            out.append(_failed(e, "sandbox", "SandboxBackendUnavailable", True))
        if isinstance(e, AgentStepLogged) and e.run_id == agent:
            out.append(_failed(_request(requests, agent), "agent", "AgentCrashed", False))
        if verdict is not None and e.run_id == other and verdict.judge_id == "judge_a":
            out.append(_judgment_failed(verdict, "past-samples", SPEC.n_samples + 3))
    return out, "past-samples"


def _request(requests: list[RunRequested], run_id: str | None) -> RunRequested:
    return next(r for r in requests if r.run_id == run_id)


async def _replay(bus: Bus) -> Report:
    state = await fold_stream(bus.js, bus.stream.name, bus.subjects.events)
    return build_report(Projections(state), campaign=SPEC.campaign_id, n_resamples=50)


async def test_the_fold_progress_and_report_agree_on_what_went_wrong(bus: Bus) -> None:
    events, refused = planted()
    await publish_events(bus.js, bus.subjects, bus.stream.name, events)
    state = await fold_stream(bus.js, bus.stream.name, bus.subjects.events)
    assert ["JudgmentFailed" in r.subject for r in state.refused.values()] == [True]
    report = build_report(Projections(state), campaign=SPEC.campaign_id, n_resamples=50)

    # The campaign fold's answers, over the events the counting rule lets count.
    history = CampaignHistory(campaign_id=SPEC.campaign_id)
    progress = Progress(campaign_id=SPEC.campaign_id)
    for e in events:
        if e.event_id != refused:
            history.apply(e)
            progress.apply(e)
    counts = history.state_counts()
    assert (counts["expected"], counts["sealed"]) == (9, 7)
    assert (counts["failed (infra)"], counts["failed (agent)"]) == (1, 1)
    problems = problems_of(history)
    assert {(c.stage, c.error_class, c.count) for c in problems.causes} == {
        ("sandbox", "SandboxBackendUnavailable", 1),
        ("judge", "ProviderError", 1),
    }
    assert [(c.stage, c.error_class) for c in problems.scored_failures] == [
        ("agent", "AgentCrashed")
    ]
    assert problems.pending_verdicts == {"judge_b": 1} and problems.pending_runs == 0
    assert not problems.complete and not problems.ok

    # `assay watch`'s progress and the report say the same; the refused failure is in neither.
    assert problems_of(progress) == problems == report.problems

    # Shown by the terminal and the HTML of the report.
    console = Console(record=True, width=200)
    print_report(report, console)
    text = console.export_text()
    assert "did not go as planned" in text and "SandboxBackendUnavailable" in text
    assert "1 verdict(s) of judge_b never came" in text
    assert "ProviderError" in render_html(report)

    # A snapshot round trip and a fresh replay rebuild the same problems section, bytes too.
    restored = state_from_json(json.loads(json.dumps(state_to_json(state))))
    again = build_report(Projections(restored), campaign=SPEC.campaign_id, n_resamples=50)
    fresh = await _replay(bus)
    assert report_json(again) == report_json(report) == report_json(fresh)
    section = json.loads(report_json(fresh))["problems"]
    assert section == report.problems.model_dump(mode="json")
