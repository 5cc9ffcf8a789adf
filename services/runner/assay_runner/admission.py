"""Admission: every submitted task is answered with TaskAccepted or TaskRejected.

What can be rejected at the door is rejected here (a signature that does not tie the
submission to the operator key, a task `assay submit` would refuse, unknown campaign, a
missing or mismatched blob, a task id already taken by another task, a message that is
no valid TaskSubmitted), so it never turns into an infrastructure failure of its runs
later, nor into runs the aggregator then counts nowhere.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, TypedDict

from assay.bus import Bus, Refusal
from assay.security.signing import TrustList
from assay.store import BlobStore, import_upload, upload_bucket
from assay.tasks import check_task
from assay_schemas import (
    ID_PATTERN,
    BlobCorrupted,
    BlobNotFound,
    CampaignSpec,
    FileRef,
    Producer,
    RejectionReason,
    RunRequested,
    StoreError,
    TaskInputError,
    TaskRejected,
    TaskSubmitted,
    UploadRefused,
    parse_event_subject,
    run_id_for,
)

__all__ = ["Admission", "Stored", "answering"]

log = logging.getLogger(__name__)

_ID = re.compile(ID_PATTERN)


class Answer(TypedDict):
    """Envelope and submission of the one answer (TaskAccepted or TaskRejected) to a
    submission (its id derives from the submission's event id)."""

    campaign_id: str
    task_id: str
    causation_id: str
    submission: str
    producer: Producer


def answering(event: TaskSubmitted, producer: Producer) -> Answer:
    """Envelope of the one answer (TaskAccepted or TaskRejected) to a submission."""
    return Answer(
        campaign_id=event.campaign_id,
        task_id=event.task.task_id,
        causation_id=event.event_id,
        submission=event.event_id,
        producer=producer,
    )


class Stored(NamedTuple):
    """A submission as stored: what its signature covers."""

    sequence: int
    subject: str
    data: bytes
    headers: Mapping[str, str]


@dataclass(kw_only=True)
class Admission:
    """The runner's door: checks one submission against the campaign, store and log."""

    bus: Bus
    store: BlobStore
    trust: TrustList | None = None
    """Whose signatures count (None: signatures are not checked), as for the aggregator."""
    blob_reads: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while an attachment is read and verified (it is read whole): share one among
    admissions that run at once to bound the memory they hold."""

    async def rejection(
        self, event: TaskSubmitted, campaign: CampaignSpec | None, stored: Stored | int
    ) -> TaskRejected | None:
        """Why this submission is rejected (the door's answer), or None when its runs may be scheduled (a bare
        sequence stands for a message with no headers: unsigned)."""
        if isinstance(stored, int):
            stored = Stored(stored, self.bus.subjects.of(event), b"", {})
        sequence = stored.sequence
        if self.trust is not None:
            signature = self.trust.verify(stored.subject, stored.data, stored.headers, event)
            if not signature.ok:
                # The aggregator refuses it too: runs scheduled from it would count nowhere.
                return self._rejected(
                    event, sequence, "invalid", f"not admitted: {signature.reason}"
                )
        try:
            check_task(event.task, max_bytes=self.bus.settings.max_attachment_bytes)
        except TaskInputError as e:
            return self._rejected(event, sequence, "invalid", str(e))
        if campaign is None:
            return self._rejected(
                event, sequence, "unknown_campaign", f"no campaign {event.campaign_id!r}"
            )
        duplicate = await self._duplicate_of(event, campaign)
        if duplicate is not None:
            return self._rejected(event, sequence, "duplicate", duplicate)
        for ref in event.task.attachments:
            problem = await self._blob_problem(event.campaign_id, ref)
            if problem is not None:
                return self._rejected(event, sequence, *problem)
        return None

    async def _duplicate_of(self, event: TaskSubmitted, campaign: CampaignSpec) -> str | None:
        """A different task already scheduled under this task id (one direct lookup)."""
        agent = campaign.agents[0].agent_id
        run_id = run_id_for(campaign.campaign_id, event.task.task_id, agent, 0)
        earlier = await self.bus.last_event(
            self.bus.subjects.event("RunRequested", campaign.campaign_id, run_id)
        )
        if isinstance(earlier, RunRequested) and earlier.task != event.task:
            return _taken(event, earlier)
        return None

    def taken(self, event: TaskSubmitted, sequence: int, earlier: RunRequested) -> TaskRejected:
        """The rejection of a submission whose task id another task's run took first (found
        when its own run's request could not be stored: another runner admitted it)."""
        return self._rejected(event, sequence, "duplicate", _taken(event, earlier))

    async def _blob_problem(
        self, campaign_id: str, ref: FileRef
    ) -> tuple[RejectionReason, str] | None:
        where = f"attachment {ref.path!r} ({ref.sha256})"
        async with self.blob_reads:
            return await self._check_blob(campaign_id, ref, where)

    async def _check_blob(
        self, campaign_id: str, ref: FileRef, where: str
    ) -> tuple[RejectionReason, str] | None:
        try:
            if not await asyncio.to_thread(self.store.exists, ref.sha256):
                bucket = upload_bucket(self.bus.settings, campaign_id)
                imported = await import_upload(
                    self.bus.js, bucket, ref.sha256, self.store, size=ref.size
                )
                if imported is None:
                    return "missing_blob", f"{where}: not in the blob store nor in {bucket}"
            data = await asyncio.to_thread(self.store.get_bytes, ref.sha256)
        except BlobNotFound as e:
            return "missing_blob", f"{where}: {e}"
        except BlobCorrupted as e:
            return "blob_mismatch", f"{where}: {e}{await self._discard(ref.sha256)}"
        except UploadRefused as e:
            return "blob_mismatch", f"{where}: {e}"
        if len(data) != ref.size:
            return "blob_mismatch", f"{where}: {len(data)} bytes stored, {ref.size} declared"
        return None

    async def _discard(self, sha256: str) -> str:
        """Remove bytes put under the wrong name, so the publisher can put the right ones
        (its key may only create blobs); what the rejection should add about it."""
        try:
            removed = await asyncio.to_thread(self.store.discard_corrupted, sha256)
        except StoreError as e:  # e.g. a runner key without delete rights: still refuse
            log.warning("cannot remove the mismatched blob %s: %s", sha256, e)
            return "; the wrong bytes are still stored, so the operator must remove them"
        # Not removed here: another admission of the same task (the campaign's and the
        # task's consumers both admit it) may have removed them first; the publisher's
        # next step is the same.
        if removed or not await asyncio.to_thread(self.store.exists, sha256):
            return "; the wrong bytes were removed, upload the right ones again"
        return ""

    def _rejected(
        self, event: TaskSubmitted, sequence: int, reason: RejectionReason, detail: str
    ) -> TaskRejected:
        return TaskRejected(
            event_id=TaskRejected.id_for(event.event_id),
            **answering(event, self.bus.producer),
            sequence=sequence,
            reason=reason,
            detail=detail,
        )

    async def answer_invalid(self, refusal: Refusal) -> None:
        """Tell the sender of a message that is no valid TaskSubmitted why it was refused."""
        tokens = parse_event_subject(refusal.subject)
        campaign_id = tokens.campaign_id if tokens is not None else ""
        if not _ID.match(campaign_id):
            return  # no campaign to answer on: the dead letter is all there is
        fields = _loose_fields(refusal.data)
        # A body too broken to name itself is still answered: the publisher set its
        # Nats-Msg-Id to the event id it meant.
        event_id = fields.get("event_id") or _msg_id(refusal.headers)
        task_id = fields.get("task_id")
        await self.bus.publish(
            TaskRejected(
                event_id=TaskRejected.id_for("invalid", refusal.subject, refusal.sequence),
                campaign_id=campaign_id,
                task_id=task_id if task_id and _ID.match(task_id) else None,
                causation_id=event_id,
                submission=event_id,
                sequence=refusal.sequence,
                reason="invalid",
                detail=refusal.reason[:2000],
                producer=self.bus.producer,
            )
        )


def _taken(event: TaskSubmitted, earlier: RunRequested) -> str:
    return (
        f"task id {event.task.task_id!r} is taken by another task in campaign "
        f"{event.campaign_id!r} (submitted by {earlier.causation_id})"
    )


def _msg_id(headers: Mapping[str, str]) -> str | None:
    value = headers.get("Nats-Msg-Id", "")
    return value[:128] if value else None


def _loose_fields(data: bytes) -> dict[str, str]:
    """event_id and task id of a refused message, when it has them (to correlate only)."""
    try:
        body = json.loads(data)
    except ValueError:
        return {}
    if not isinstance(body, dict):
        return {}
    task = body.get("task")
    out = {
        "event_id": body.get("event_id"),
        "task_id": task.get("task_id") if isinstance(task, dict) else body.get("task_id"),
    }
    return {k: v[:128] for k, v in out.items() if isinstance(v, str)}
