"""The fold: ``apply(state, sequence, event)`` — the only way state changes.

Pure bookkeeping on plain records, so the same events give the same state whatever
the path (live consumer, snapshot + catch-up, fresh replay). Idempotent by event id.
Everything that depends on two events (is a sealed file an attachment? is a run
judged?) is decided when frames are built, not here, so the order in which events
arrive (redeliveries) does not change the result; where two events claim the same
slot (a re-seal, a repeated verdict), the higher stream sequence wins. Where a run is
comes from the one lifecycle (`assay_schemas.advance`), in log order: the counting rule has
refused a second end of a run already, and a seal after a failure keeps the failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from assay.security.signing import TrustList
from assay_report.state import State
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignHistory,
    CampaignStarted,
    CampaignStopped,
    ControlDeclared,
    Event,
    JudgeRegistered,
    JudgmentFailed,
    JudgmentRecorded,
    RunCancelled,
    RunFailed,
    RunRequested,
    SandboxReady,
    TaskSubmitted,
    lifecycle_step,
)

from . import stopping
from .counting import counts, moved
from .fold_judging import _judge_registered, _judgment, _judgment_failed
from .fold_runs import (
    _campaign_started,
    _cancelled,
    _control_declared,
    _failed,
    _finished,
    _run,
    _run_requested,
    _sandbox_ready,
    _sealed,
    _step,
    _stopped,
    _task_submitted,
)

__all__ = ["apply", "counts_signed", "fold", "subject_of"]


_HANDLERS: dict[type[Event], Callable[[State, Any, int], None]] = {
    CampaignStarted: _campaign_started,
    TaskSubmitted: _task_submitted,
    RunRequested: _run_requested,
    SandboxReady: _sandbox_ready,
    AgentStepLogged: _step,
    AgentFinished: _finished,
    RunFailed: _failed,
    ArtifactsSealed: _sealed,
    JudgmentRecorded: _judgment,
    JudgmentFailed: _judgment_failed,
    JudgeRegistered: _judge_registered,
    ControlDeclared: _control_declared,
    RunCancelled: _cancelled,
    CampaignStopped: _stopped,
}


def counts_signed(
    state: State,
    trust: TrustList | None,
    sequence: int,
    subject: str,
    data: bytes,
    headers: Mapping[str, str],
    event: Event,
) -> bool:
    """Whether a delivered event may count (`counting.counts`): without a trust list its
    signature is not checked; with one, it must tie to the operator key."""
    signature = None if trust is None else trust.verify(subject, data, headers, event)
    return counts(state, sequence, subject, event, signature)


def apply(
    state: State, sequence: int, event: Event, load: Callable[[str], bytes] | None = None
) -> bool:
    """Fold one event in; return False (and change nothing) if it was applied before.

    ``load`` reads a blob: a seal whose manifest was too large to inline is read through
    it (without one, such a seal counts its files but lists none).
    """
    if event.event_id in state.seen:
        return False
    if load is not None and type(event) is ArtifactsSealed:
        event = event.resolved(load)
    if not _advance(state, sequence, event):
        return False
    handler = _HANDLERS.get(type(event))
    if handler is not None:
        handler(state, event, sequence)
    history = state.histories.get(event.campaign_id)
    if history is None:
        history = state.histories[event.campaign_id] = CampaignHistory(
            campaign_id=event.campaign_id
        )
    history.apply(event)
    stopping.observe(state, sequence, event, history)
    state.seen[event.event_id] = sequence
    if sequence > state.last_sequence:
        state.last_sequence = sequence
    state.applied += 1
    state.version += 1
    return True


def _advance(state: State, sequence: int, event: Event) -> bool:
    """Move the event's run through its lifecycle; False when the lifecycle refuses it
    (the counting rule refused it already on every reader's path: this only keeps `apply` safe)."""
    step = lifecycle_step(event)
    if step is None or not event.run_id:
        return True
    run = _run(state, event, sequence)
    steps, where = moved(run, sequence, event)
    if steps.index([sequence, step]) in where.refused:
        return False
    run.lifecycle, run.phase = steps, where.phase
    run.end_sequence = steps[where.ended][0] if where.ended is not None else 0
    return True


def fold(
    events: Any, state: State | None = None, load: Callable[[str], bytes] | None = None
) -> State:
    """Fold ``(sequence, event)`` pairs into a (new) state, through the counting rule (signatures
    unchecked; each event's subject is the one it would be published on)."""
    out = state if state is not None else State()
    for sequence, event in events:
        if counts(out, sequence, subject_of(event), event):
            apply(out, sequence, event, load)
    return out


def subject_of(event: Event) -> str:
    """The subject's event tokens (the prefix belongs to a deployment, not to the fold)."""
    return f"ev.{event.event_type}.{event.campaign_id}.{event.run_id or '-'}"
