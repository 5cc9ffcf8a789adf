"""Publishing a log as a deployment writes it: in order, pipelined, each event signed by the
service that writes it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from nats.js import JetStreamContext

from assay.bus import Subjects
from assay.security.signing import Signer
from assay_schemas import Event

__all__ = ["publish_events", "writer_of"]


_WRITERS = {
    "CampaignStarted": "cli",
    "TaskSubmitted": "cli",
    "RunRequested": "runner",
    "AgentStepLogged": "runner",
    "AgentFinished": "runner",
    "RunFailed": "runner",
    "SandboxReady": "sandbox-manager",
    "ArtifactsSealed": "sandbox-manager",
}


def writer_of(event: Event) -> str:
    """The service (as `Bus(service=...)` names it) that writes this event in a deployment."""
    if event.event_type in _WRITERS:
        return _WRITERS[event.event_type]
    judge = getattr(event, "judge", None)
    judge_id = judge.judge_id if judge is not None else getattr(event, "judge_id", "")
    if getattr(event, "judge_kind", "machine") == "human":
        return str(judge_id)  # a reviewer signs as reviewer-<name>, which is its judge id
    return f"judge-{judge_id}"


async def publish_events(
    js: JetStreamContext,
    subjects: Subjects,
    stream: str,
    events: Iterator[Event] | Sequence[Event],
    *,
    window: int = 2000,
    signers: Callable[[str], Signer | None] | None = None,
) -> int:
    """Publish events in order, pipelined (acks awaited per window); return how many.

    One connection sending in order keeps log order equal to generation order, while
    not waiting for each PubAck keeps it fast. With `signers` (service name → signer,
    e.g. `partial(signer_for, settings)`), each event is signed by the service that
    would have written it, as a live deployment signs it.
    """
    pending: list[Any] = []
    n = 0
    cache: dict[str, Signer | None] = {}
    for event in events:
        data = event.model_dump_json().encode()
        subject = subjects.of(event)
        headers = {"Nats-Msg-Id": event.event_id}
        if signers is not None:
            service = writer_of(event)
            if service not in cache:
                cache[service] = signers(service)
            signer = cache[service]
            if signer is not None:
                headers.update(signer.headers(subject, data))
        pending.append(await js.publish_async(subject, data, stream=stream, headers=headers))
        n += 1
        if len(pending) >= window:
            for fut in pending:
                await fut
            pending.clear()
    for fut in pending:
        await fut
    return n
