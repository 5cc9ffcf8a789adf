"""One publish path and one consume path for every service."""

from __future__ import annotations

import asyncio
import contextlib
import errno
from collections.abc import AsyncIterator
from functools import partial
from typing import Any, ClassVar

from faststream.nats import JStream
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.js import JetStreamContext
from nats.js.errors import APIError

from assay.config import Settings
from assay.security.signing import TrustList, signer_for, trust_for
from assay.telemetry import inject_headers
from assay_schemas import (
    BusError,
    CampaignSpec,
    Event,
    LogChanged,
    NoResponders,
    Producer,
    RequestUnanswered,
)

from ._acks import Acks
from ._broker import connect_error, ensure_streams, make_broker, refused_everywhere
from ._dead_letters import read_dead_letters
from ._lag import LagWatch
from ._lost import LostWatch
from ._lost_deliveries import LostDeliveries
from ._outages import again_through_outages
from ._pulls import BatchPull, WorkerPull
from ._reads import LogReads
from ._records import Published, Unchanged
from ._replay import LoggedEvent, Skipped, decode_log, read_raw
from ._requests import RequestServer
from ._subjects import Subjects

__all__ = ["Bus"]

_EXPECTED_LAST = "Nats-Expected-Last-Subject-Sequence"
_EXPECTED_LAST_ON = "Nats-Expected-Last-Subject-Sequence-Subject"
"""The subject the expectation is on, when it is not the one published to (nats-server 2.11+)."""
_WRONG_LAST_SEQUENCE = 10071
"""JetStream's error code for a failed expectation ("wrong last sequence")."""


class Bus(LostDeliveries, LogReads):
    """The event log as services see it: typed publish, durable typed consumers."""

    connect_timeout: ClassVar[float | None] = None
    """Seconds the first connection may take before `connect` fails with a BusError
    naming the cause. None: keep trying, as a service started before its NATS should;
    the command line sets a few seconds so that a wrong address is said at once."""

    def __init__(self, settings: Settings, *, service: str, version: str = "0.1.0") -> None:
        self.settings = settings
        self.producer = Producer(service=service, version=version)
        self.subjects = Subjects(prefix=settings.subject_prefix)
        self.broker = make_broker(settings, name=f"assay-{service}")
        # Streams are created by ensure_streams on start; faststream only references them.
        self.stream = JStream(settings.stream, declare=False)
        self._dlq = JStream(f"{settings.stream}_DLQ", declare=False)
        self._connected = False
        self._durables: list[str] = []
        self._request_servers: list[RequestServer] = []
        self._pulls: list[BatchPull | WorkerPull] = []
        self._lost: dict[str, LostWatch] = {}
        """Each consumed durable's lost last deliveries, handled as its handler's last
        failure would be (see `_lost.py`)."""
        self._lost_pulls: list[WorkerPull] = []
        """Each consumed durable's pull of its max-deliveries advisories (`_watch_lost`)."""
        self._acked: dict[tuple[str, int], None] = {}
        """Messages this process handled and acked late or on their last delivery, by
        durable and stream sequence (the latest few thousand): one acked after its ack wait
        (a late heartbeat, a paused process) has its advisory out all the same, and is no
        lost one."""
        self._lost_given_up: dict[tuple[str, int], None] = {}
        """Messages given up from an advisory here (the latest few hundred): a delivery of
        one still queued in this process (fetched, waiting for a worker past the ack wait)
        is settled unhandled, or its run would end twice."""
        self._acks = Acks()
        """Handled messages' acks, sent once per turn of the event loop."""
        self._handling: dict[tuple[str, int], asyncio.Future[bool]] = {}
        """Deliveries being handled, by durable and stream sequence; each settles to
        whether its message was acked (see `_deliver`)."""
        self._signer = signer_for(settings, service)
        self.trust: TrustList | None = None
        """Whose signatures a consumed event must carry (None: none checked); this
        deployment's (`trust_for`) from `start` on."""
        self._js: tuple[Any, JetStreamContext] | None = None
        self._lag = LagWatch(settings.stream)
        self.campaigns: dict[str, tuple[int, CampaignSpec | None]] = {}
        """`read_campaign`'s answers by subject, with the sequence they were read up to."""

    @property
    def lag(self) -> dict[str, int]:
        """Pending + unacked messages per durable, refreshed while consuming."""
        return self._lag.lag

    @property
    def js(self) -> JetStreamContext:
        """The nats-py JetStream context of the live connection (made once per connection:
        a publish per step made one each)."""
        connection = self.broker.connection
        if self._js is None or self._js[0] is not connection:
            self._js = (connection, connection.jetstream())
        return self._js[1]

    async def connect(self) -> None:
        """Connect and make sure the streams exist, without consuming yet."""
        if self._connected:
            return
        # A one-shot command facing a port nobody listens on says so at once; nats-py
        # would retry it for the whole connect timeout.
        if self.connect_timeout is not None and await refused_everywhere(self.settings.nats_url):
            refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
            raise connect_error(self.settings, refused, None)
        try:
            await asyncio.wait_for(self.broker.connect(), self.connect_timeout)
        except (NatsError, OSError, TimeoutError) as e:
            with contextlib.suppress(Exception):  # half-made connection: its error is below
                await self.broker.stop()
            raise connect_error(self.settings, e, self.connect_timeout) from e
        try:
            await ensure_streams(self.js, self.settings)
        except (NatsError, TimeoutError) as e:
            with contextlib.suppress(Exception):
                await self.broker.stop()
            raise connect_error(self.settings, e, None, streams=True) from e
        self._connected = True

    async def start(self) -> None:
        """Connect, then start every registered consumer."""
        await self.connect()
        # Read at start, as the runner's door does: the operator key may come after the bus.
        self.trust = trust_for(self.settings)
        # Before the first pull: a restarted instance must hear of what the pull finds lost.
        self._lost_pulls.clear()
        for watch in self._lost.values():
            lost = self._watch_lost(watch)
            what = f"{lost.durable}: its lost deliveries' consumer"
            await again_through_outages(partial(lost.start, self.broker.connection), what)
        await self.broker.start()
        for pull in self._pulls:
            await again_through_outages(
                partial(pull.start, self.broker.connection), f"{pull.durable}: its consumer"
            )
        for server in self._request_servers:
            await server.start(self.broker.connection)
        if self._durables:
            self._lag.start(self.js, self._durables)

    async def stop(self) -> None:
        """Drain consumers and close the connection."""
        self._lag.stop()
        for server in self._request_servers:
            await server.stop()
        for pull in self._pulls:
            await pull.stop()
        await self._acks.flush()
        # A lost delivery cut short here is given up again by whoever takes its advisory
        # next (its dead letter and the run's end have deterministic ids: stored once).
        for lost in self._lost_pulls:
            await lost.stop()
        await self.broker.stop()
        self._connected = False

    async def __aenter__(self) -> Bus:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- publishing ---------------------------------------------------------------------

    async def publish(
        self,
        event: Event,
        *,
        timeout: float = 10.0,
        encoded: bytes | None = None,
        unchanged: Unchanged | None = None,
    ) -> Published:
        """Append an event to the log and wait for JetStream's acknowledgement.

        `Nats-Msg-Id` is the event id, so a retried publish is stored once. `encoded`:
        the event's JSON where the caller made it already (to measure it), not made again.
        `unchanged`: store it only if that subject's last message is still the one read
        (else LogChanged, nothing stored).
        """
        subject = self.subjects.of(event)
        data = encoded if encoded is not None else event.model_dump_json().encode()
        headers = inject_headers({"Nats-Msg-Id": event.event_id})
        if unchanged is not None:
            headers[_EXPECTED_LAST] = str(unchanged.last_sequence)
            headers[_EXPECTED_LAST_ON] = unchanged.subject
        if self._signer is not None:
            headers.update(self._signer.headers(subject, data))
        try:
            # nats-py's JetStream publish itself, as faststream's broker would call it,
            # without its layers (middlewares, a command object, a correlation id per event).
            ack = await self.js.publish(
                subject, data, timeout=timeout, stream=self.stream.name, headers=headers
            )
        except APIError as e:
            if e.err_code == _WRONG_LAST_SEQUENCE and unchanged is not None:
                raise LogChanged(
                    f"{event.event_type} {event.event_id} not logged: {unchanged.subject} "
                    f"changed since it was read at sequence {unchanged.last_sequence} ({e.description})"
                ) from e
            raise self._publish_failed(event, subject, e) from e
        except Exception as e:  # nats-py raises several unrelated types here
            raise self._publish_failed(event, subject, e) from e
        if ack is None:
            raise BusError(f"publish of {event.event_id} to {subject}: no PubAck")
        return Published(ack.seq, bool(ack.duplicate))

    def _publish_failed(self, event: Event, subject: str, error: Exception) -> BusError:
        # A publish the user's permissions refuse goes unanswered: say so.
        user = self.settings.nats_user
        why = f" (may NATS user {user!r} publish {event.event_type}?)" if user else ""
        return BusError(
            f"publish of {event.event_type} {event.event_id} to {subject} failed: {error}{why}"
        )

    def replay(
        self,
        *,
        start: int = 1,
        subject: str | None = None,
        follow: bool = False,
        skipped: list[Skipped] | None = None,
        lookups: int = 0,
    ) -> AsyncIterator[LoggedEvent]:
        """Typed events in log order from `start` (all events unless `subject` filters);
        messages that are not valid events are skipped and, if given, listed in `skipped`.
        `lookups`: read that many first messages by direct lookups (see `read_raw`)."""
        raws = read_raw(
            self.js,
            self.stream.name,
            start=start,
            subject=subject or self.subjects.events,
            follow=follow,
            lookups=lookups,
        )
        return decode_log(raws, skipped)

    # --- request-reply (outside the log) -------------------------------------------------

    def serve_requests(self, server: RequestServer) -> RequestServer:
        """Answer `server`'s core-NATS requests (sandbox commands) from `start` to `stop`;
        not part of the log."""
        server.service = self.producer.service
        self._request_servers.append(server)
        return server

    async def request(self, subject: str, data: bytes, *, timeout: float) -> bytes:
        """Send a core-NATS request and return the reply's bytes."""
        try:
            msg = await self.broker.connection.request(
                subject, data, timeout=timeout, headers=inject_headers({})
            )
        except TimeoutError as e:  # nats-py's TimeoutError is one
            raise RequestUnanswered(f"request on {subject}: no reply in {timeout:g} s") from e
        except NoRespondersError as e:
            raise NoResponders(f"request on {subject}: nobody serves it (NoResponders)") from e
        except Exception as e:  # connection loss
            raise BusError(f"request on {subject} failed: {type(e).__name__}: {e}") from e
        return bytes(msg.data)

    async def dead_letters(self, durable: str) -> list[tuple[bytes, dict[str, str]]]:
        """Every dead letter of a consumer so far: (payload, headers)."""
        return await read_dead_letters(self.js, self.subjects.dlq(durable), self._dlq.name)
