"""Retry: rerun runs that ended in an infrastructure failure, as a new attempt.

The attempt is part of a run's identity (`run_id_for(..., attempt)`), so the failed
attempt and its events stay in the log untouched; the report's statistics use the latest
attempt of each (task, agent, epoch) and its accounting counts every attempt.
"""

from __future__ import annotations

from assay.bus import Bus
from assay_schemas import RunFailed, RunRequested, new_event, run_id_for

__all__ = ["retry_failed"]

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
            new_event(
                RunRequested,
                key=(run_id,),
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
