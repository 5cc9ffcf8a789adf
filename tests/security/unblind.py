"""How a reader of the log without the controls secret tries to tell control runs apart.

Pure functions over the events a judge's NATS user replays (and their subjects), kept
apart from the test so the same attack runs against any version of the code."""

from __future__ import annotations

from assay_schemas import CampaignStarted, Event, RunRequested, derive_id

__all__ = ["linked_by_declarations", "linked_by_roster"]


def _requests(events: list[tuple[str, Event]]) -> dict[str, RunRequested]:
    return {e.run_id: e for _, e in events if isinstance(e, RunRequested) and e.run_id}


def linked_by_declarations(events: list[tuple[str, Event]]) -> set[str]:
    """Run ids a `ControlDeclared` gives away: by a field naming the run, by its event id
    (the public `derive_id` of the run id, or the run id itself), or by its subject."""
    runs = _requests(events)
    ids_of = {derive_id("ControlDeclared", r): r for r in runs} | {r: r for r in runs}
    out: set[str] = set()
    for subject, e in events:
        if e.event_type != "ControlDeclared":
            continue
        body = e.model_dump_json()
        out |= {r for r in runs if r in body or r in subject.split(".")}
        if e.event_id in ids_of:
            out.add(ids_of[e.event_id])
        agent_id = getattr(e, "agent_id", None)  # a clear agent id names all its runs
        out |= {r for r, q in runs.items() if agent_id and q.agent.agent_id == agent_id}
    return out


def linked_by_roster(events: list[tuple[str, Event]]) -> set[str]:
    """Run ids whose agent is not in its campaign's roster (`CampaignStarted.agents`)."""
    roster = {
        (e.campaign_id, a.agent_id)
        for _, e in events
        if isinstance(e, CampaignStarted)
        for a in e.campaign.agents
    }
    return {
        r for r, q in _requests(events).items() if (q.campaign_id, q.agent.agent_id) not in roster
    }
