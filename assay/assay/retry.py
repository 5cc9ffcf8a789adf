"""Retry: rerun runs that ended in an infrastructure failure, as a new attempt.

The attempt is part of a run's identity (`run_id_for(..., attempt)`), so the failed
attempt and its events stay in the log untouched; the report's statistics use the latest
attempt of each (task, agent, epoch) and its accounting counts every attempt.
"""

from __future__ import annotations

from assay.bus import Bus
from assay_schemas import RunFailed, RunRequested, run_id_for

__all__ = ["retry_failed", "why_none_retried"]

Slot = tuple[str, str, str, int]
"""(campaign, task, agent, epoch): what a run and its retries are attempts at."""


def _slot(request: RunRequested) -> Slot:
    return (request.campaign_id, request.task.task_id, request.agent.agent_id, request.epoch)


async def retry_failed(
    bus: Bus, *, campaign: str = "*", run: str | None = None
) -> list[RunRequested]:
    """Request a new attempt of every infrastructure-failed run that is the latest attempt
    of its (task, agent, epoch), limited to one campaign or one run; return the requests."""
    failed: dict[str, RunFailed] = {}
    async for logged in bus.replay(subject=bus.subjects.event("RunFailed", campaign)):
        event = logged.event
        if isinstance(event, RunFailed) and event.infrastructure and event.run_id:
            failed.setdefault(event.run_id, event)
    if run is not None:
        failed = {k: v for k, v in failed.items() if k == run}
    if not failed:
        return []
    latest: dict[Slot, RunRequested] = {}
    async for logged in bus.replay(subject=bus.subjects.event("RunRequested", campaign)):
        request = logged.event
        if isinstance(request, RunRequested):
            known = latest.get(_slot(request))
            if known is None or request.attempt > known.attempt:
                latest[_slot(request)] = request
    retries = []
    for request in latest.values():
        cause = failed.get(request.run_id or "")
        if cause is None:
            continue  # not failed, or a later attempt exists already
        attempt = request.attempt + 1
        run_id = run_id_for(*_slot(request), attempt)
        fields = request.model_dump(
            exclude={"event_id", "occurred_at", "run_id", "attempt", "causation_id", "producer"}
        )
        retries.append(
            RunRequested(
                event_id=RunRequested.id_for(run_id),
                **fields,
                run_id=run_id,
                attempt=attempt,
                causation_id=cause.event_id,
                producer=bus.producer,
            )
        )
    for retry in retries:
        await bus.publish(retry)
    return retries


def _where(campaign: str) -> str:
    return "the log" if campaign == "*" else f"campaign {campaign}"


async def why_none_retried(bus: Bus, *, campaign: str = "*", run: str | None = None) -> str:
    """Why `retry_failed` with these filters requested nothing, in one sentence."""
    if run is None:
        failed = {
            logged.event.run_id
            async for logged in bus.replay(subject=bus.subjects.event("RunFailed", campaign))
            if isinstance(logged.event, RunFailed) and logged.event.infrastructure
        }
        if not failed:
            return f"no infrastructure-failed run in {_where(campaign)}"
        n = len(failed)
        return (
            f"no infrastructure-failed run without a later attempt in {_where(campaign)} "
            f"({n} infrastructure failure{'s' if n > 1 else ''}, retried already)"
        )
    events = [
        logged.event async for logged in bus.replay(subject=bus.subjects.event("*", campaign, run))
    ]
    request = next((e for e in events if isinstance(e, RunRequested)), None)
    if request is None:
        where = "" if campaign == "*" else f" of campaign {campaign}"
        return f"no run {run} in the log{where} (see `assay events --type RunRequested`)"
    failures = [e for e in events if isinstance(e, RunFailed)]
    if not failures:
        return (
            f"run {run} did not fail (its latest event is {events[-1].event_type}); "
            "only runs that ended in an infrastructure failure are retried"
        )
    infra = next((f for f in failures if f.infrastructure), None)
    if infra is None:
        f = failures[0]
        side = "on the agent's side " if f.stage == "agent" else ""
        return (
            f"run {run} failed {side}({f.stage}: {f.error[:200]}), a result that is scored, "
            "not retried; only infrastructure failures are retried"
        )
    later = [
        logged.event
        async for logged in bus.replay(
            subject=bus.subjects.event("RunRequested", request.campaign_id)
        )
        if isinstance(logged.event, RunRequested)
        and _slot(logged.event) == _slot(request)
        and logged.event.attempt > request.attempt
    ]
    if later:
        last = max(later, key=lambda r: r.attempt)
        return f"run {run} was retried already: attempt {last.attempt} is run {last.run_id}"
    return f"run {run} ended in an infrastructure failure but could not be retried"
