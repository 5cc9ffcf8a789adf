"""Folding the log into state straight from the stream: full rebuilds and catch-ups.

Reads raw messages (``read_raw``) and decodes each with ``parse_event`` (bounded, and
checked against its subject). Messages that are not valid events are skipped and
recorded as refused, as the live consumer does (it also dead-letters them).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing
from typing import cast

from nats.js import JetStreamContext

from assay.bus import RawMessage, read_raw
from assay.security.chain import verify_history
from assay.security.signing import TrustList, Verdict
from assay_schemas import Event, InvalidEvent, parse_event

from .fold import apply, checked
from .state import State

__all__ = ["fold_stream", "head_sequence"]

log = logging.getLogger("assay_aggregator.rebuild")

VERIFY_BATCH = 256
"""Messages whose signatures are checked together on the worker thread (by chain: one
Ed25519 check per linked run of each producer's events in the batch)."""


async def head_sequence(js: JetStreamContext, stream: str) -> int:
    """Last sequence currently in the stream."""
    info = await js.stream_info(stream)
    return int(info.state.last_seq)


async def fold_stream(
    js: JetStreamContext,
    stream: str,
    subject: str,
    *,
    state: State | None = None,
    until: int | None = None,
    trust: TrustList | None = None,
    load: Callable[[str], bytes] | None = None,
) -> State:
    """Fold events after ``state.last_sequence`` (from 1 for a new state) up to ``until``.

    Without ``until`` it stops at the end of the log as it stood when reading began. With
    ``trust``, only events signed by an enrolled key allowed to write them count; ``load``
    reads the manifests of seals too large to inline.
    """
    out = state if state is not None else State()
    if trust is not None:
        out.trust_root = trust.operator_key
    start = out.last_sequence + 1
    if until is not None and start > until:
        return out
    # read_raw is an async generator; closing it on `break` removes its consumer at once.
    reader = cast(
        AsyncGenerator[RawMessage, None], read_raw(js, stream, start=start, subject=subject)
    )
    async with aclosing(reader) as messages:
        if trust is None:
            async for raw in messages:
                if until is not None and raw.sequence > until:
                    break
                event = _decode(out, raw)
                if event is not None:
                    apply(out, raw.sequence, event, load)
        else:
            await _fold_verified(messages, out, trust, until, load)
    return out


def _decode(state: State, raw: RawMessage) -> Event | None:
    try:
        return parse_event(raw.data, subject=raw.subject)
    except InvalidEvent as e:
        log.warning("rebuild skips sequence %d: %s", raw.sequence, e)
        state.refuse(raw.sequence, raw.subject, str(e))
        return None


Batch = list[tuple[RawMessage, Event | None]]


def _verify(trust: TrustList, batch: Batch) -> list[Verdict | None]:
    decoded = [(raw, event) for raw, event in batch if event is not None]
    verdicts = iter(verify_history(trust, decoded))
    return [None if event is None else next(verdicts) for _, event in batch]


async def _fold_verified(
    messages: AsyncIterator[RawMessage],
    state: State,
    trust: TrustList,
    until: int | None,
    load: Callable[[str], bytes] | None,
) -> None:
    """Fold with every signature checked, the checks of one batch running on a worker
    thread while the next batch is read and decoded: Ed25519 verification releases the
    GIL, so a replay's two halves use two cores. Batches are folded in log order."""
    loop = asyncio.get_running_loop()
    checking: tuple[Batch, asyncio.Future[list[Verdict | None]]] | None = None
    batch: Batch = []

    async def fold_checked() -> None:
        if checking is not None:
            done, verdicts = checking[0], await checking[1]
            for (raw, event), verdict in zip(done, verdicts, strict=True):
                if event is None or verdict is None:
                    continue
                if checked(state, raw.sequence, raw.subject, event, verdict):
                    apply(state, raw.sequence, event, load)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify") as pool:
        async for raw in messages:
            if until is not None and raw.sequence > until:
                break
            batch.append((raw, _decode(state, raw)))
            if len(batch) >= VERIFY_BATCH:
                await fold_checked()
                checking = (batch, loop.run_in_executor(pool, _verify, trust, batch))
                batch = []
        await fold_checked()
        checking = (batch, loop.run_in_executor(pool, _verify, trust, batch))
        await fold_checked()
