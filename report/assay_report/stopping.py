"""The report's stopping section (#51): when and why a campaign with ``stopping:``
stopped, runs planned and done, cost spent and saved, the anytime-valid intervals its
rule read, and the warnings the design names. Read from the fold (`State.stopping`, the
campaign histories), so a replay rebuilds it byte for byte."""

from __future__ import annotations

from .projections import Projections
from .statistics import Row

__all__ = ["ANYTIME_LABEL", "AnytimeInterval", "CampaignStopping", "stopping_rows"]

ANYTIME_LABEL = "anytime-valid (hedged betting CS)"


class CampaignStopping(Row):
    """A campaign that declared ``stopping:``: whether, when and why it stopped."""

    campaign_id: str
    rule: str
    """The rule declared (``ranking_settled``, ``ci_width`` or ``decided``)."""
    stopped: bool
    reason: str
    """Why it stopped ('' while it has not): the rule, or ``max_cost``."""
    settled: bool
    """The rule itself was met (False: it ran to the end, or only the cost cap stopped it)."""
    leader: str
    decided_at_sequence: int
    """The log sequence after which the rule was met (0: not stopped)."""
    waves_checked: int
    runs_planned: int
    runs_done: int
    """Runs that reached their outcome (cancelled ones are not done: they never ran)."""
    runs_cancelled: int
    cost_usd: float
    """Spent on the campaign (agents and judges), as logged."""
    cost_saved_usd: float
    """An estimate: the mean cost of a finished run × the runs cancelled (judging not counted)."""
    warnings: str
    """The rule's warnings, '; '-joined ('' when none)."""


class AnytimeInterval(Row):
    """An anytime-valid interval the stopping rule read when it decided, shown beside the
    bootstrap intervals (which a campaign that stopped early must not be read by alone)."""

    campaign_id: str
    kind: str
    """``score`` (0-10), ``pass_share`` (0-1) or ``difference`` (agent − other, points)."""
    agent_id: str
    other: str
    n: int
    """Complete tasks it rests on."""
    estimate: float
    low: float
    high: float
    method: str
    """Always ``ANYTIME_LABEL``."""


def stopping_rows(
    p: Projections, ids: list[str]
) -> tuple[tuple[CampaignStopping, ...], tuple[AnytimeInterval, ...]]:
    """The stopping rows of the report's campaigns that declared ``stopping:``."""
    rows: list[CampaignStopping] = []
    intervals: list[AnytimeInterval] = []
    for cid in ids:
        history = p.state.histories.get(cid)
        spec = history.campaigns.get(cid) if history is not None else None
        if history is None or spec is None or spec.stopping is None:
            continue
        record = p.state.stopping.get(cid)
        decision = record.decision if record is not None else None
        stopped = history.stopped
        warnings = list(decision["warnings"]) if decision else []
        if decision and record is not None and record.logged not in (None, decision):
            warnings.append("the logged CampaignStopped differs from the log's own decision")
        if decision and not decision["settled"]:
            warnings.append(
                f"stopped on max_cost_usd ({spec.stopping.max_cost_usd}) before {spec.stopping.when}"
            )
        if decision and any(
            f["n"] < spec.stopping.min_tasks_per_agent
            for f in decision["figures"]
            if f["kind"] == "score" and decision["settled"]
        ):
            warnings.append(
                f"rule met on fewer than min_tasks_per_agent ({spec.stopping.min_tasks_per_agent}) "
                "tasks: a bug, never expected"
            )
        runs = [r for r in p.state.runs.values() if r.campaign_id == cid]
        finished = [r.cost_usd for r in runs if r.finished]
        cancelled = len(history.cancelled)
        mean_cost = sum(finished) / len(finished) if finished else 0.0
        rows.append(
            CampaignStopping(
                campaign_id=cid,
                rule=spec.stopping.when,
                stopped=stopped,
                reason=str(decision["reason"]) if decision else "",
                settled=bool(decision["settled"]) if decision else False,
                leader=str(decision.get("leader") or "") if decision else "",
                decided_at_sequence=int(decision["decided_at_sequence"]) if decision else 0,
                waves_checked=record.checked_waves if record is not None else 0,
                runs_planned=history.expected_runs,
                runs_done=len((history.requested & history.ended) - history.cancelled),
                runs_cancelled=cancelled,
                cost_usd=round(history.cost_usd, 9),
                cost_saved_usd=round(mean_cost * cancelled, 9),
                warnings="; ".join(dict.fromkeys(warnings)),
            )
        )
        for f in decision["figures"] if decision else []:
            intervals.append(
                AnytimeInterval(
                    campaign_id=cid,
                    kind=f["kind"],
                    agent_id=f["agent_id"],
                    other=f.get("other") or "",
                    n=f["n"],
                    estimate=f["estimate"],
                    low=f["low"],
                    high=f["high"],
                    method=ANYTIME_LABEL,
                )
            )
    return tuple(rows), tuple(intervals)
