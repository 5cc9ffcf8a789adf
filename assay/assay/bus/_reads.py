"""Direct reads of the log: one subject's last or first event, and one run's history."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import aclosing
from typing import TypeVar

from faststream.nats import JStream
from nats.js import JetStreamContext

from assay_schemas import Event, parse_event

from ._replay import LoggedEvent, decode_log, read_raw
from ._subjects import Subjects

__all__ = ["LogReads"]

E = TypeVar("E", bound=Event)

_RUN_LOOKUPS = 3
"""A run's history read by direct lookups before a consumer is made: its request and
SandboxReady (and one more), what the runner and the sandbox-manager read of a live run."""


class LogReads:
    """The reads `Bus` offers on top of its connection (`js`, `stream`, `subjects`)."""

    subjects: Subjects
    stream: JStream

    @property
    def js(self) -> JetStreamContext:
        raise NotImplementedError

    async def has_event(self, subject: str) -> bool:
        """Whether any event was stored on exactly this subject (one direct lookup)."""
        from nats.js.errors import NotFoundError

        try:
            await self.js.get_last_msg(self.stream.name, subject)
        except NotFoundError:
            return False
        return True

    async def last_sequence(self, subject: str) -> int:
        """The stream sequence of the last message stored on this subject (or filter), valid
        event or not (0: none): what a publish conditioned on it (`Unchanged`) expects."""
        from nats.js.errors import NotFoundError

        try:
            return (await self.js.get_last_msg(self.stream.name, subject)).seq or 0
        except NotFoundError:
            return 0

    async def last_event(self, subject: str) -> Event | None:
        """The last event stored on exactly this subject, or None (one direct lookup)."""
        from nats.js.errors import NotFoundError

        try:
            msg = await self.js.get_last_msg(self.stream.name, subject)
        except NotFoundError:
            return None
        return parse_event(msg.data or b"", subject=subject)

    async def first_event(self, subject: str, event_type: type[E]) -> E | None:
        """The first valid `event_type` stored on exactly `subject`, or None: one direct
        lookup when it is the subject's first message; messages that are not valid events
        of that type are skipped, as a replay skips them."""
        # Closed on the early return: a reader left suspended keeps its ordered consumer
        # subscribed until the event loop ends, and the connection's close waited for it.
        async with (
            aclosing(read_raw(self.js, self.stream.name, subject=subject, lookups=1)) as raws,
            aclosing(decode_log(raws)) as logged_events,
        ):
            async for logged in logged_events:
                if isinstance(logged.event, event_type):
                    return logged.event
        return None

    async def run_events(
        self,
        campaign_id: str,
        run_id: str,
        *,
        types: tuple[type[Event], ...] | None = None,
        known: Mapping[int, Event] | None = None,
    ) -> list[Event]:
        """Every event of one run so far, in order (used to rebuild state after a crash).

        `types`: only events of these types, each type read on its own subject (a run's
        steps are most of its events, and most readers need none of them), merged back
        into log order. Short histories are read by direct lookups (see `read_raw`).
        `known`: events of the run decoded already, by sequence (the one being handled),
        not decoded again.
        """
        if types is None:
            subjects = [self.subjects.event("*", campaign_id, run_id)]
        else:
            subjects = [self.subjects.event(t.__name__, campaign_id, run_id) for t in types]
        reads = [
            self._read_list(subject, lookups=_RUN_LOOKUPS if types is None else 2, known=known)
            for subject in subjects
        ]
        logged = [item for part in await asyncio.gather(*reads) for item in part]
        if len(subjects) > 1:
            logged.sort(key=lambda item: item.sequence)
        return [item.event for item in logged]

    async def _read_list(
        self, subject: str, *, lookups: int, known: Mapping[int, Event] | None = None
    ) -> list[LoggedEvent]:
        raws = read_raw(self.js, self.stream.name, subject=subject, lookups=lookups)
        return [item async for item in decode_log(raws, known=known)]
