"""Campaign files (YAML/TOML/JSON) and submitting a campaign's tasks to the log."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from pydantic import ValidationError

from assay.bus import Bus
from assay.store import BlobStore
from assay.tasks import TaskDraft, build_task
from assay_schemas import (
    CampaignSpec,
    CampaignStarted,
    ConfigError,
    Task,
    TaskSubmitted,
    describe_validation,
    load_rubric,
    new_event,
    read_structured_file,
)

__all__ = ["load_campaign", "submit_campaign", "submit_tasks"]


def load_campaign(path: Path) -> CampaignSpec:
    """Read and validate a campaign file; a `rubric:` string is a path to a rubric file."""
    data = read_structured_file(path, what="campaign file")
    if not isinstance(data, dict):
        raise ConfigError(f"campaign file {path}: expected a mapping at the top level")
    rubric = data.get("rubric")
    if isinstance(rubric, str):
        data["rubric"] = load_rubric(path.parent / rubric)
    try:
        return CampaignSpec.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"campaign file {path}: {describe_validation(e)}") from e


def _task_digest(task: Task) -> str:
    return hashlib.sha256(task.model_dump_json().encode()).hexdigest()[:16]


async def submit_tasks(
    bus: Bus, store: BlobStore, campaign_id: str, drafts: list[TaskDraft]
) -> list[Task]:
    """Upload attachments and publish one TaskSubmitted per task.

    Every draft's fields are validated before anything is uploaded or published, so a bad
    task in a batch publishes nothing.
    """
    for draft in drafts:
        build_task(draft.fields, [])
    tasks = [await asyncio.to_thread(d.to_task, store) for d in drafts]
    for task in tasks:
        event = new_event(
            TaskSubmitted,
            key=(campaign_id, task.task_id, _task_digest(task)),
            campaign_id=campaign_id,
            task_id=task.task_id,
            task=task,
            producer=bus.producer,
        )
        await bus.publish(event)
    return tasks


async def submit_campaign(
    bus: Bus, store: BlobStore, campaign: CampaignSpec, drafts: list[TaskDraft]
) -> list[Task]:
    """Publish CampaignStarted, then the campaign's tasks."""
    for draft in drafts:
        build_task(draft.fields, [])
    started = new_event(
        CampaignStarted,
        key=(campaign.campaign_id,),
        campaign_id=campaign.campaign_id,
        campaign=campaign,
        producer=bus.producer,
    )
    await bus.publish(started)
    return await submit_tasks(bus, store, campaign.campaign_id, drafts)
