"""A campaign with ``stopping:`` stops when its answer is settled (#51): the real runner
requests it wave by wave on a real nats-server, the real aggregator decides after each
wave and logs `CampaignStopped`, the runner cancels the runs never requested, every run
ends once, and a fresh fold of the log decides the same at the same sequence.

The runs' workers (sandbox, agent, judge) are played by `_Workers`, which answers each
request on the bus with the events those services log, with planted scores: the runner
and the aggregator under test cannot tell, and the campaign's 40 tasks take seconds
instead of the minutes 80 sandboxes would on a shared machine.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from rich.console import Console

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_aggregator.invariants import check_log
from assay_aggregator.rebuild import fold_stream
from assay_aggregator.service import AggregatorService
from assay_aggregator.service import build as build_aggregator
from assay_aggregator.verify import ReportParams, verify
from assay_report.html import render_html
from assay_report.projections import Projections
from assay_report.report import build_report
from assay_report.terminal import print_report
from assay_runner.service import build as build_runner
from assay_schemas import (
    RULES_JUDGE_ID,
    AgentFinished,
    AgentSpec,
    ArtifactsSealed,
    CampaignSpec,
    CampaignStopped,
    DimensionScore,
    Event,
    JudgeSpec,
    JudgmentRecorded,
    Producer,
    RunCancelled,
    RunHistory,
    RunRequested,
    StoppingSpec,
    Task,
    TaskSubmitted,
    Usage,
    default_rubric,
    run_id_for,
)
from assay_testing.events import campaign_started

CLI = Producer(service="cli", version="test")
WORKER = Producer(service="worker", version="test")
N_TASKS = 40
SCORES = {"strong": 9, "weak": 2}
"""The planted gap: each judge gives every dimension of a run this score."""


def _campaign(campaign_id: str) -> CampaignSpec:
    return CampaignSpec(
        campaign_id=campaign_id,
        agents=[
            AgentSpec(agent_id="strong", model="scripted-strong", family="acme"),
            AgentSpec(agent_id="weak", model="scripted-weak", family="acme"),
        ],
        judges=[JudgeSpec(judge_id="judge-a", model="scripted-judge", family="orbit")],
        scripted=True,
        stopping=StoppingSpec(when="ranking_settled", min_tasks_per_agent=10, check_every=4),
    )


async def _submit(bus: Bus, campaign: CampaignSpec) -> None:
    cid = campaign.campaign_id
    await bus.publish(campaign_started(campaign, producer=CLI))
    for t in range(N_TASKS):
        task = Task(task_id=f"task_{t:03d}", prompt=f"Estimate the value of sample {t}.")
        await bus.publish(
            TaskSubmitted(
                event_id=TaskSubmitted.id_for(cid, task.task_id),
                campaign_id=cid,
                task_id=task.task_id,
                task=task,
                producer=CLI,
            )
        )


def _worked(request: RunRequested) -> list[Event]:
    """What the sandbox-manager, the runner's agent and the judges log for one run."""
    env = {
        "campaign_id": request.campaign_id,
        "run_id": request.run_id,
        "task_id": request.task_id,
        "producer": WORKER,
    }
    rid = request.run_id or ""
    score = SCORES[request.agent.agent_id]
    sealed = ArtifactsSealed(
        event_id=ArtifactsSealed.id_for(rid),
        files=[],
        final_message="done",
        agent_id=request.agent.agent_id,
        epoch=request.epoch,
        sandbox_id=f"sb-{rid}",
        **env,
    )
    dims = {
        d: DimensionScore(score=score, reason="planted") for d in default_rubric().dimension_keys
    }
    verdict = {
        "sample": 0,
        "rubric_id": "assay-default",
        "rubric_version": 1,
        "causation_id": sealed.event_id,
    }
    return [
        AgentFinished(
            event_id=AgentFinished.id_for(rid),
            stop_reason="submitted",
            final_message="done",
            steps=1,
            usage=Usage(input_tokens=1000, output_tokens=100),
            cost_usd=0.01,
            duration_s=1.0,
            **env,
        ),
        sealed,
        JudgmentRecorded(
            event_id=JudgmentRecorded.id_for(rid, RULES_JUDGE_ID, 0),
            judge_id=RULES_JUDGE_ID,
            judge_family="rules",
            judge_model="rules",
            **verdict,
            **env,
        ),
        JudgmentRecorded(
            event_id=JudgmentRecorded.id_for(rid, "judge-a", 0),
            judge_id="judge-a",
            judge_family="orbit",
            judge_model="scripted-judge",
            scores=dims,
            **verdict,
            **env,
        ),
    ]


@contextlib.asynccontextmanager
async def _workers(settings: Settings, *, tasks: int | None = None) -> AsyncIterator[None]:
    """Answer the run requests on the log with their runs' events, in request order (those
    of the first `tasks` tasks requested, or all), skipping runs the log shows judged
    already (as after a restart)."""

    async def work() -> None:
        async with Bus(settings, service="worker") as bus:
            judged = {e.run_id for _, e in await _log(bus) if isinstance(e, JudgmentRecorded)}
            seen: list[str] = []
            async for logged in bus.replay(subject=bus.subjects.event("RunRequested"), follow=True):
                request = logged.event
                if not isinstance(request, RunRequested) or request.run_id in judged:
                    continue
                if request.task_id not in seen:
                    seen.append(request.task_id)
                if tasks is not None and seen.index(request.task_id) >= tasks:
                    continue
                for event in _worked(request):
                    await bus.publish(event)

    task = asyncio.create_task(work())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def _aggregator_and_runner(
    settings: Settings, store: LocalBlobStore
) -> AsyncIterator[AggregatorService]:
    """The real aggregator (flushing every 0.2 s) and runner, started in this process."""
    aggregator = build_aggregator(settings, store=store, n_resamples=50)
    aggregator.flush_interval_s = 0.2
    runner = build_runner(settings, store=store)
    await aggregator.start()
    await runner.start()
    try:
        yield aggregator
    finally:
        await runner.stop()
        await aggregator.stop()


async def _log(bus: Bus) -> list[tuple[int, Event]]:
    return [(e.sequence, e.event) async for e in bus.replay()]


async def _until(bus: Bus, done: object, timeout: float = 120.0) -> list[tuple[int, Event]]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        log = await _log(bus)
        if done(log):  # type: ignore[operator]
            return log
        if asyncio.get_running_loop().time() > deadline:
            kinds = sorted({e.event_type for _, e in log})
            raise AssertionError(f"log did not settle in {timeout}s: {len(log)} events, {kinds}")
        await asyncio.sleep(0.3)


def _planned(campaign: CampaignSpec) -> set[str]:
    return {
        run_id_for(campaign.campaign_id, f"task_{t:03d}", a.agent_id, e)
        for t in range(N_TASKS)
        for a in campaign.agents
        for e in range(campaign.epochs)
    }


def _settled(campaign: CampaignSpec):  # type: ignore[no-untyped-def]
    planned = _planned(campaign)

    def done(log: list[tuple[int, Event]]) -> bool:
        ended = {e.run_id for _, e in log if isinstance(e, (RunCancelled, JudgmentRecorded))}
        stopped = any(isinstance(e, CampaignStopped) for _, e in log)
        judged = {
            e.run_id for _, e in log if isinstance(e, JudgmentRecorded) and e.judge_id == "judge-a"
        }
        requested = {e.run_id for _, e in log if isinstance(e, RunRequested)}
        return stopped and planned <= ended and requested <= judged

    return done


async def test_a_settled_campaign_stops_early_cancels_the_rest_and_replays_the_same(
    bus: Bus, settings: Settings
) -> None:
    campaign = _campaign("waves")
    store = LocalBlobStore(settings.blob_dir)
    async with _aggregator_and_runner(settings, store) as aggregator, _workers(settings):
        await _submit(bus, campaign)
        log = await _until(bus, _settled(campaign))

    events = [e for _, e in log]
    stops = [(s, e) for s, e in log if isinstance(e, CampaignStopped)]
    requested = {e.run_id for e in events if isinstance(e, RunRequested)}
    cancelled = [e.run_id for e in events if isinstance(e, RunCancelled)]
    assert len(stops) == 1
    seq, stop = stops[0]
    assert stop.reason == "ranking_settled" and stop.settled and stop.leader == "strong"
    diff = next(f for f in stop.figures if f.kind == "difference")
    assert diff.low > 0 and diff.n >= 10
    # Stopped early: some runs never ran, each cancelled once, none of them requested.
    assert cancelled and len(cancelled) == len(set(cancelled))
    assert not requested & set(cancelled)
    assert requested | set(cancelled) == _planned(campaign)
    assert len(requested) < len(_planned(campaign))
    # No run requested after the one wave in flight beyond the decision.
    late = [s for s, e in log if isinstance(e, RunRequested) and s > seq]
    assert len(late) <= 2 * 4 * len(campaign.agents), late

    # Every run ends exactly once; the log's invariants hold.
    for rid in _planned(campaign):
        history = RunHistory.fold(e for e in events if e.run_id == rid)
        assert history.ended is not None and not history.refused, rid
    state, breaches = check_log(log)
    assert breaches == []
    assert state.runs[cancelled[0]].phase == "cancelled"

    # Replay decides the same at the same sequence, and equals the live aggregator.
    fresh = await fold_stream(bus.js, bus.stream.name, bus.subjects.events)
    record = fresh.stopping["waves"]
    assert record.decision is not None and record.decision == record.logged
    assert record.decision["decided_at_sequence"] == stop.decided_at_sequence < seq
    assert aggregator.state.stopping["waves"].decision == record.decision
    results = await verify(settings, ReportParams(n_resamples=50))
    assert [r.name for r in results if not r.identical] == []

    # The report says when and why it stopped, what ran and what was saved.
    report = build_report(Projections(fresh), n_resamples=50)
    (row,) = report.stopping
    assert (row.reason, row.settled, row.leader) == ("ranking_settled", True, "strong")
    assert row.decided_at_sequence == stop.decided_at_sequence
    assert (row.runs_planned, row.runs_cancelled) == (2 * N_TASKS, len(cancelled))
    assert row.runs_done == len(requested) and row.warnings == ""
    assert row.cost_saved_usd == pytest.approx(0.01 * len(cancelled))
    assert {i.kind for i in report.anytime_intervals} == {"score", "pass_share", "difference"}
    console = Console(record=True, width=200)
    print_report(report, console)
    text = console.export_text()
    assert "waves stopped early: ranking_settled" in text
    assert "anytime-valid (hedged betting CS)" in text
    assert "Stopping: waves" in render_html(report)


async def test_a_runner_that_missed_the_stop_cancels_what_is_left_when_it_starts(
    bus: Bus, settings: Settings
) -> None:
    campaign = _campaign("crash")
    cid = campaign.campaign_id
    store = LocalBlobStore(settings.blob_dir)
    runner = build_runner(settings, store=store)
    await runner.start()
    try:
        await _submit(bus, campaign)
        # No workers, no aggregator: the first two waves are requested and wait.
        await _until(
            bus, lambda log: sum(isinstance(e, RunRequested) for _, e in log) == 16, timeout=60
        )
    finally:
        await runner.stop()
    # The decision is logged while no runner runs (as after a crash before cancelling).
    await bus.publish(
        CampaignStopped(
            event_id=CampaignStopped.id_for(cid),
            campaign_id=cid,
            reason="max_cost",
            settled=False,
            decided_at_sequence=1,
            producer=Producer(service="aggregator", version="test"),
        )
    )
    runner = build_runner(settings, store=store)
    await runner.start()
    try:
        log = await _until(
            bus, lambda log: sum(isinstance(e, RunCancelled) for _, e in log) == 64, timeout=60
        )
    finally:
        await runner.stop()
    requested = {e.run_id for _, e in log if isinstance(e, RunRequested)}
    cancelled = {e.run_id for _, e in log if isinstance(e, RunCancelled)}
    assert len(requested) == 16 and not requested & cancelled
    assert requested | cancelled == _planned(campaign)
    _, breaches = check_log(log)
    assert [b for b in breaches if b.kind == "second_end"] == []
