"""Waves (#51): a campaign with ``stopping:`` is requested a wave of tasks at a time.

Pure: the campaign's history (folded from its log) in, the tasks to request now or the
runs to cancel out, so that a runner that restarts, or two that look at once, decide the
same from the same log.

- Tasks run in a seeded order: by a hash of (campaign id, task id), never the order they
  were submitted (a suite listed easy-first would make the sequence's observations depend
  on their place, and the confidence sequence assumes they do not).
- Every agent's every epoch of a task is requested together.
- A wave is ``check_every`` tasks in the order their runs were requested (the seeded
  order, unless tasks arrived while others were already requested: a task's place is
  fixed once requested). The runner keeps at most one wave beyond the last complete one
  in flight (a task is complete when each of its runs reached its outcome and every
  verdict it owes is in: what the aggregator's check waits for), so a stop wastes at most
  the wave after the one that settled it.
- Once the log holds `CampaignStopped`, every planned run not requested is cancelled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from assay_schemas import CampaignHistory, CampaignSpec, derive_id, expected_runs

__all__ = ["planned_runs", "task_order", "tasks_due", "to_cancel"]


def task_order(campaign_id: str, task_ids: Iterable[str]) -> list[str]:
    """The campaign's tasks in their seeded order."""
    return sorted(task_ids, key=lambda t: (derive_id("wave", campaign_id, t), t))


def planned_runs(spec: CampaignSpec, history: CampaignHistory, task_id: str) -> set[str]:
    """The run ids a task of the campaign asks for (its agents × epochs, its controls')."""
    key = f"{spec.campaign_id}/{task_id}"
    controls = {
        a.split("/", 1)[1] for a in history.control_agents if a.startswith(f"{spec.campaign_id}/")
    }
    roster = {r.run_id for r in expected_runs(spec, task_id, skip=controls)}
    return roster | history.control_runs.get(key, set())


def tasks_due(
    spec: CampaignSpec,
    history: CampaignHistory,
    accepted: Iterable[str],
    requested_order: Sequence[str] = (),
) -> list[str]:
    """The accepted tasks to request now, in order (none once the campaign stopped).

    `requested_order`: task ids in the order the log holds their first run request. Waves
    complete in that order: counted in the seeded order instead, a task requested later
    (accepted after others were requested) that sorts before them held every wave behind
    it open, and the campaign stalled a wave short."""
    rule = spec.stopping
    if rule is None or history.stopped:
        return []
    order = task_order(spec.campaign_id, set(accepted))
    runs = {t: planned_runs(spec, history, t) for t in order}
    requested = [t for t in order if runs[t] & history.requested]
    is_requested = set(requested)
    placed = [t for t in dict.fromkeys(requested_order) if t in is_requested]
    seen = set(placed)
    in_place = placed + [t for t in requested if t not in seen]
    complete = 0
    for t in in_place:
        if not all(history.run_settled(r) for r in runs[t]):
            break
        complete += 1
    allowed = rule.check_every * (complete // rule.check_every + 2)
    waiting = [t for t in order if not runs[t] & history.requested]
    return waiting[: max(0, allowed - len(requested))]


def to_cancel(
    spec: CampaignSpec, history: CampaignHistory, accepted: Iterable[str]
) -> Mapping[str, set[str]]:
    """task id → its planned runs never requested nor cancelled (once the campaign stopped)."""
    if not history.stopped:
        return {}
    out: dict[str, set[str]] = {}
    for t in task_order(spec.campaign_id, set(accepted)):
        left = planned_runs(spec, history, t) - history.requested - history.cancelled
        if left:
            out[t] = left
    return out
