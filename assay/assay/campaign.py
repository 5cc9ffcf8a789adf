"""Campaign files (YAML/TOML/JSON) and submitting a campaign's tasks to the log."""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from functools import partial
from pathlib import Path

from pydantic import ValidationError

from assay.bundle import BundleRefused, pack_bundle
from assay.bus import Bus, Published
from assay.controls import plan_controls, publish_controls, with_control_agents
from assay.security.controls import controls_key
from assay.store import BlobStore
from assay.tasks import TaskDraft, build_task
from assay_schemas import (
    MAX_EVENT_BYTES,
    CampaignSpec,
    CampaignStarted,
    ConfigError,
    Event,
    ProgramSpec,
    Task,
    TaskInputError,
    TaskSubmitted,
    describe_validation,
    load_rubric,
    read_structured_file,
)

__all__ = ["campaign_warnings", "load_campaign", "store_bundles", "submit_campaign", "submit_tasks"]


def load_campaign(path: Path) -> CampaignSpec:
    """Read and validate a campaign file; a `rubric:` string is a path to a rubric file."""
    data = read_structured_file(path, what="campaign file")
    if not isinstance(data, dict):
        raise ConfigError(f"campaign file {path}: expected a mapping at the top level")
    rubric = data.get("rubric")
    if isinstance(rubric, str):
        data["rubric"] = load_rubric(path.parent / rubric)
    _resolve_bundles(data, path.parent)
    try:
        return CampaignSpec.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"campaign file {path}: {describe_validation(e)}") from e


def campaign_warnings(campaign: CampaignSpec) -> list[str]:
    """What a campaign asks for that weakens what it measures, said before it runs."""
    controls = campaign.controls
    if controls is None or campaign.scripted:
        return []
    out = []
    if not controls.like_agents:
        out.append(
            "controls.like_agents is false: each control plays the variant declared for it, "
            "so a control agent, which wears one of your models for the whole campaign, "
            "does every kind of work in turn, including kinds that model never does (the "
            "pair of who a run looks like and what it left tells a control apart); leave it "
            "true unless the report must not depend on the order the runs ran in"
        )
    if controls.epochs > 1:
        out.append(
            f"controls.epochs is {controls.epochs}: a control that plays the same plan twice "
            "on a task leaves the same files and answer both times, where a sampled model's "
            "runs differ, so a reader of the whole log can tell a control's repeats from "
            "agents' runs (an LLM judge reads one case, and a reviewer is shown any work "
            "once); set it to 1 unless the judges' own run-to-run spread on the same work is "
            "what you want measured"
        )
    return out


def _resolve_bundles(data: dict[str, object], folder: Path) -> None:
    """A program's bundle path and the controls' references are relative to the campaign
    file."""
    controls = data.get("controls")
    if isinstance(controls, dict) and isinstance(controls.get("references"), str):
        controls["references"] = str(folder / controls["references"])
    agents = data.get("agents")
    for agent in agents if isinstance(agents, list) else []:
        program = agent.get("program") if isinstance(agent, dict) else None
        if isinstance(program, dict) and isinstance(program.get("bundle"), str):
            program["bundle"] = str(folder / program["bundle"])


def store_bundles(store: BlobStore, campaign: CampaignSpec) -> CampaignSpec:
    """The campaign with each program's bundle checked, packed, stored and named by hash."""
    agents = [
        agent.model_copy(update={"program": _stored_bundle(store, agent.program)})
        if agent.program is not None
        else agent
        for agent in campaign.agents
    ]
    return campaign.model_copy(update={"agents": agents})


def _stored_bundle(store: BlobStore, program: ProgramSpec) -> ProgramSpec:
    if program.bundle is not None:
        blob = store.put_bytes(pack_bundle(Path(program.bundle)))
        return program.model_copy(update={"bundle": None, "bundle_sha256": blob.sha256})
    if program.bundle_sha256 is not None and not store.exists(program.bundle_sha256):
        raise BundleRefused(f"bundle {program.bundle_sha256}: not in the blob store")
    return program


def _task_digest(task: Task) -> str:
    return hashlib.sha256(task.model_dump_json().encode()).hexdigest()[:16]


def _check_size(event: Event, what: str) -> None:
    """Refuse an event the server would reject, naming what made it big."""
    size = len(event.model_dump_json().encode())
    if size <= MAX_EVENT_BYTES:
        return
    fields = event.model_dump(mode="json")
    task = fields.get("task")
    parts = task if isinstance(task, dict) else fields
    field, biggest = max(((k, len(str(v).encode())) for k, v in parts.items()), key=lambda p: p[1])
    raise TaskInputError(
        f"{what}: the event is {size} bytes, over the {MAX_EVENT_BYTES} byte limit "
        f"({field} alone is {biggest} bytes; large data belongs in attachments)"
    )


async def _task_events(
    bus: Bus, store: BlobStore, campaign_id: str, drafts: list[TaskDraft]
) -> list[TaskSubmitted]:
    """Every task's event, validated and measured; attachments uploaded (blobs only)."""
    for draft in drafts:
        build_task(draft.fields, [])
    events = []
    for draft in drafts:
        task = await asyncio.to_thread(draft.to_task, store)
        event = TaskSubmitted(
            event_id=TaskSubmitted.id_for(campaign_id, task.task_id, _task_digest(task)),
            campaign_id=campaign_id,
            task_id=task.task_id,
            task=task,
            producer=bus.producer,
        )
        _check_size(event, f"task {task.task_id}")
        events.append(event)
    return events


async def submit_tasks(
    bus: Bus, store: BlobStore, campaign_id: str, drafts: list[TaskDraft]
) -> list[Task]:
    """Upload attachments and publish one TaskSubmitted per task.

    The whole batch is validated (fields, patterns, each event's encoded size) before
    anything is published, so a bad task in a batch publishes nothing.
    """
    events = await _task_events(bus, store, campaign_id, drafts)
    await _publish_in_order(bus, events)
    return [e.task for e in events]


async def submit_campaign(
    bus: Bus, store: BlobStore, campaign: CampaignSpec, drafts: list[TaskDraft]
) -> list[Task]:
    """Publish CampaignStarted, then the campaign's tasks; nothing when any task or bundle
    is bad."""
    events = await _task_events(bus, store, campaign.campaign_id, drafts)
    key = controls_key(bus.settings)
    controls = await asyncio.to_thread(
        partial(plan_controls, secret=key.secret), store, campaign, drafts, events, bus.producer
    )
    opened = [key.open(d) for d in controls]
    campaign = with_control_agents(campaign, opened, secret=key.secret)
    campaign = await asyncio.to_thread(store_bundles, store, campaign)
    started = CampaignStarted(
        event_id=CampaignStarted.id_for(campaign.campaign_id),
        campaign_id=campaign.campaign_id,
        campaign=campaign,
        producer=bus.producer,
    )
    _check_size(started, f"campaign {campaign.campaign_id}")
    await bus.publish(started)
    await publish_controls(bus, controls)
    await _publish_in_order(bus, events)
    return [e.task for e in events]


PUBLISHES_IN_FLIGHT = 64
"""Task submissions awaiting their acknowledgement at once. One at a time, each waited a
round trip: a 500-task campaign took about a second to submit on a busy machine, and its
first runs could not start before."""


async def _publish_in_order(bus: Bus, events: list[TaskSubmitted]) -> None:
    """Publish each event, up to PUBLISHES_IN_FLIGHT unacknowledged at once. Each is sent
    before the next one starts (one connection: the log holds them in this order); the
    first failure stops what has not been sent and is raised."""
    pending: deque[asyncio.Task[Published]] = deque()
    try:
        for event in events:
            pending.append(asyncio.create_task(bus.publish(event)))
            if len(pending) >= PUBLISHES_IN_FLIGHT:
                await pending.popleft()
        while pending:
            await pending.popleft()
    finally:
        for left in pending:
            left.cancel()
