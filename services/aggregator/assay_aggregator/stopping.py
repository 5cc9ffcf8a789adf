"""The stopping check (#51): after each wave of a campaign with ``stopping:``, whether
its rule is met, as a function of the log up to the event that completed the wave.

Part of the fold (`fold.apply` calls :func:`observe` after every event), so a live
aggregator, a snapshot plus catch-up and a fresh replay decide the same at the same
sequence. The service publishes the decision as `CampaignStopped` (once: its id derives
from the campaign id); the fold reads that event back (:func:`logged`) so that
`assay check` can compare what was logged with what the log decides.

A run counts when it reached its outcome and every verdict it owed is in
(`CampaignHistory.run_settled`): its score is the mean over the machine judges of each
judge's mean rating (the report's run score); an agent's failure scores 0 and does not
pass; a run the platform failed is never scored (its task never completes for that
agent: the rule waits rather than count the platform's failure against anyone).
A task is complete for an agent once ``epochs`` of its runs are scored. A wave is checked
when every agent has ``check_every`` more complete tasks.
"""

from __future__ import annotations

from typing import Any

from assay_report.state import State, StoppingRecord
from assay_report.statistics import ScoredRun, StoppingDecision, decide
from assay_schemas import (
    RULES_JUDGE_ID,
    ArtifactsSealed,
    CampaignHistory,
    CampaignSpec,
    CampaignStopped,
    Event,
    JudgmentFailed,
    JudgmentRecorded,
    RunFailed,
    StoppingFigure,
)

__all__ = ["decision_fields", "logged", "observe"]

_COMPLETING = (JudgmentRecorded, JudgmentFailed, ArtifactsSealed, RunFailed)
"""The events after which a run may have reached its outcome with every verdict in."""


def observe(state: State, sequence: int, event: Event, history: CampaignHistory) -> None:
    """Score the event's run if it completed now, and check the rule after a full wave."""
    if not isinstance(event, _COMPLETING):  # most events (steps): asked first
        return
    spec = history.campaigns.get(event.campaign_id)
    if spec is None or spec.stopping is None:
        return
    record = state.stopping.setdefault(event.campaign_id, StoppingRecord(event.campaign_id))
    run = event.run_id or ""
    if record.decision is not None or not run or not history.run_settled(run):
        return
    if any(row[1] == run for row in record.scored):
        return
    scored = _score(state, history, spec, run)
    if scored is None:
        return
    agent, task, score, passed = scored
    record.scored.append([sequence, run, agent, task, score, passed])
    cell = f"{agent}/{task}"
    record.cells[cell] = record.cells.get(cell, 0) + 1
    _check(record, history, spec, sequence)


def _agents(history: CampaignHistory, spec: CampaignSpec) -> list[str]:
    controls = {
        a.split("/", 1)[1] for a in history.control_agents if a.startswith(f"{spec.campaign_id}/")
    }
    return [a.agent_id for a in spec.agents if a.agent_id not in controls]


def _score(
    state: State, history: CampaignHistory, spec: CampaignSpec, run: str
) -> tuple[str, str, float, bool] | None:
    """(agent, task, score, passed) of a settled run; None when it is not scored."""
    record = state.runs.get(run)
    if record is None or record.phase == "cancelled" or not record.agent_id:
        return None
    if record.agent_id not in _agents(history, spec) or record.control_plan:
        return None
    failure = history.failures.get(run)
    if failure is not None:
        if failure.infrastructure:
            return None
        return record.agent_id, record.task_id, 0.0, False
    by_judge: dict[str, list[int]] = {}
    for _, judge, sample in sorted(history.owed_on(run)):
        if judge == RULES_JUDGE_ID:
            continue
        verdict = state.verdicts.get(f"{run}/{judge}/{sample}")
        if verdict is not None and verdict.scores:
            by_judge.setdefault(judge, []).extend(verdict.scores.values())
    if not by_judge:
        return None
    score = sum(sum(v) / len(v) for v in by_judge.values()) / len(by_judge)
    return record.agent_id, record.task_id, score, score >= spec.rubric.pass_threshold


def _check(
    record: StoppingRecord, history: CampaignHistory, spec: CampaignSpec, sequence: int
) -> None:
    rule = spec.stopping
    assert rule is not None  # observe checks it
    agents = _agents(history, spec)
    complete = {a: 0 for a in agents}
    for cell, n in record.cells.items():
        agent = cell.split("/", 1)[0]
        if agent in complete and n >= spec.epochs:
            complete[agent] += 1
    waves = min(complete.values(), default=0) // rule.check_every
    if waves <= record.checked_waves:
        return
    record.checked_waves = waves
    runs = [ScoredRun(str(r[2]), str(r[3]), float(r[4]), bool(r[5])) for r in record.scored]
    decision = decide(rule, agents, runs, runs_per_task=spec.epochs, cost_usd=history.cost_usd)
    if decision.stop:
        record.decision = decision_fields(decision, sequence, history.cost_usd)


def decision_fields(decision: StoppingDecision, sequence: int, cost_usd: float) -> dict[str, Any]:
    """The `CampaignStopped` fields of a decision taken after the event at `sequence`."""
    figures: list[StoppingFigure] = []
    for a in decision.agents:
        for kind, ci in (("score", a.score), ("pass_share", a.pass_share)):
            figures.append(
                StoppingFigure(
                    kind=kind,
                    agent_id=a.agent_id,
                    n=ci.n,
                    estimate=round(ci.estimate, 9),
                    low=round(ci.low, 9),
                    high=round(ci.high, 9),
                )
            )
    for p in decision.pairs:
        d = p.difference
        figures.append(
            StoppingFigure(
                kind="difference",
                agent_id=p.leader,
                other=p.other,
                n=d.n,
                estimate=round(d.estimate, 9),
                low=round(d.low, 9),
                high=round(d.high, 9),
            )
        )
    return {
        "reason": decision.reason,
        "settled": decision.settled,
        "leader": decision.leader,
        "figures": [f.model_dump(mode="json") for f in figures],
        "decided_at_sequence": sequence,
        "cost_usd": round(cost_usd, 9),
        "warnings": list(decision.warnings),
    }


def logged(state: State, sequence: int, event: CampaignStopped) -> None:
    """Keep the first `CampaignStopped` of a campaign, to compare with the fold's own."""
    record = state.stopping.setdefault(event.campaign_id, StoppingRecord(event.campaign_id))
    if record.logged is not None and record.logged_sequence < sequence:
        return
    record.logged = event.model_dump(
        mode="json",
        include={
            "reason",
            "settled",
            "leader",
            "figures",
            "decided_at_sequence",
            "cost_usd",
            "warnings",
        },
    )
    record.logged_sequence = sequence
