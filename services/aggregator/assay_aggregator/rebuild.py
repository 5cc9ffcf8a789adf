"""Folding the log into state straight from the stream: full rebuilds and catch-ups.

Reads raw messages (``read_raw``) and decodes each with ``parse_event`` (bounded, and
checked against its subject). Messages that are not valid events are skipped and
recorded as refused, as the live consumer does (it also dead-letters them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import aclosing

from nats.js import JetStreamContext

from assay.bus import RawMessage, read_raw
from assay.config import Settings
from assay.heap import collector_paused
from assay.security.chain import check_signatures
from assay.security.signing import Enrollment, TrustList
from assay.store import open_store
from assay_report.state import State
from assay_schemas import Event, InvalidEvent, parse_event

from .counting import counts
from .fold import apply

__all__ = ["blob_loader", "fold_stream", "head_sequence", "stream_created"]

log = logging.getLogger("assay_aggregator.rebuild")

BATCH = 1024
"""Messages read before they are folded in one tight loop. With signatures, the more, the
longer each producer's linked runs and the fewer Ed25519 checks (see `check_signatures`)."""


def blob_loader(settings: Settings) -> Callable[[str], bytes]:
    """How a fold reads blobs (the manifests of seals too large to inline): the configured
    store's verified read. The live aggregator and both folds of `replay --verify` read
    through it, so a seal whose manifest is a blob counts its files in each of them."""
    return open_store(settings).get_bytes


async def head_sequence(js: JetStreamContext, stream: str) -> int:
    """Last sequence currently in the stream."""
    info = await js.stream_info(stream)
    return int(info.state.last_seq)


async def stream_created(js: JetStreamContext, stream: str) -> str:
    """When the stream was created, as JetStream says: what tells a stream made again under
    the same name from the one a snapshot folded."""
    info = await js.stream_info(stream)
    return str(info.created or "")


async def fold_stream(
    js: JetStreamContext,
    stream: str,
    subject: str,
    *,
    state: State | None = None,
    until: int | None = None,
    trust: TrustList | None = None,
    load: Callable[[str], bytes] | None = None,
    observe: Callable[[State, list[RawMessage]], None] | None = None,
) -> State:
    """Fold events after ``state.last_sequence`` (from 1 for a new state) up to ``until``.

    Without ``until`` it stops at the end of the log as it stood when reading began. With
    ``trust``, only events signed by an enrolled key allowed to write them count; ``load``
    reads the manifests of seals too large to inline; ``observe`` sees each batch after it
    is folded (the viewer's search index reads the text of the events that counted).
    """
    out = state if state is not None else State()
    if not out.stream_created:
        out.stream_created = await stream_created(js, stream)
    if trust is not None:
        out.trust_root = trust.operator_key
    start = out.last_sequence + 1
    if until is not None and start > until:
        return out
    # read_raw is an async generator; closing it on `break` removes its consumer at once.
    reader = read_raw(js, stream, start=start, subject=subject)
    with collector_paused():
        async with aclosing(reader) as messages:
            batch: list[RawMessage] = []
            async for raw in messages:
                if until is not None and raw.sequence > until:
                    break
                batch.append(raw)
                if len(batch) >= BATCH:
                    _fold_batch(out, trust, batch, load)
                    if observe is not None:
                        observe(out, batch)
                    batch = []
            _fold_batch(out, trust, batch, load)
            if observe is not None:
                observe(out, batch)
    return out


def _decode(state: State, raw: RawMessage) -> Event | None:
    try:
        return parse_event(raw.data, subject=raw.subject)
    except InvalidEvent as e:
        log.warning("rebuild skips sequence %d: %s", raw.sequence, e)
        state.refuse(raw.sequence, raw.subject, str(e))
        return None


def _fold_batch(
    state: State,
    trust: TrustList | None,
    batch: list[RawMessage],
    load: Callable[[str], bytes] | None,
) -> None:
    """Fold a batch of raw messages in log order, checked against `trust` when given."""
    if trust is not None:
        _fold_checked(state, trust, batch, load)
        return
    for raw in batch:
        event = _decode(state, raw)
        if event is not None and counts(state, raw.sequence, raw.subject, event):
            apply(state, raw.sequence, event, load)


def _fold_checked(
    state: State,
    trust: TrustList,
    batch: list[RawMessage],
    load: Callable[[str], bytes] | None,
) -> None:
    """Fold a batch in log order, each event only if its signature holds (checked by chain:
    one Ed25519 check per linked run of a producer's events), its signer may write it and
    counting rule lets it count.

    Events are decoded only here, one at a time: a batch of decoded events would live
    long enough to make the garbage collector sweep the whole state again and again.
    """
    for raw, signer in zip(batch, check_signatures(trust, batch), strict=True):
        event = _decode(state, raw)
        if event is None:
            continue
        signature = trust.authorize(signer, event) if isinstance(signer, Enrollment) else signer
        if counts(state, raw.sequence, raw.subject, event, signature):
            apply(state, raw.sequence, event, load)
