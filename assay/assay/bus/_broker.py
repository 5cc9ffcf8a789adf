"""The platform's connection to NATS: the faststream broker and its streams (the event
log, its dead letters, its durables' lost-delivery advisories)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from urllib.parse import urlparse

from faststream.nats import NatsBroker
from faststream.nats.security import NatsSecurity, NatsUserPassword
from nats.errors import AuthorizationError
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from assay.config import Settings
from assay.contract import advisory_subject, lost_stream_name
from assay.security.permissions import inbox_prefix
from assay_schemas import BusError, NatsUnreachable, NotAuthenticated, PermissionDenied

from ._subjects import Subjects

__all__ = [
    "connect_error",
    "dlq_stream",
    "ensure_streams",
    "event_stream",
    "lost_stream",
    "make_broker",
    "refused_everywhere",
]


def event_stream(settings: Settings) -> StreamConfig:
    """The event log: keeps everything, refuses deletes and purges."""
    return StreamConfig(
        name=settings.stream,
        subjects=[Subjects(prefix=settings.subject_prefix).events],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        num_replicas=settings.stream_replicas,
        duplicate_window=settings.duplicate_window_s,
        deny_delete=True,
        deny_purge=True,
    )


def dlq_stream(settings: Settings) -> StreamConfig:
    """Dead letters, kept with their reasons for inspection."""
    return StreamConfig(
        name=f"{settings.stream}_DLQ",
        subjects=[Subjects(prefix=settings.subject_prefix).dead_letters],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        num_replicas=settings.stream_replicas,
        duplicate_window=settings.duplicate_window_s,
    )


LOST_STREAM_MAX_BYTES = 64 * 1024 * 1024
"""Bound of the advisories kept (a few hundred bytes each), oldest dropped first."""


def lost_stream(settings: Settings) -> StreamConfig:
    """JetStream's max-deliveries advisories of the event log's durables, kept: one the
    server publishes while no instance of its durable is up waits here for the next."""
    return StreamConfig(
        name=lost_stream_name(settings.stream),
        subjects=[advisory_subject(settings.stream, "*")],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        num_replicas=settings.stream_replicas,
        max_bytes=LOST_STREAM_MAX_BYTES,
        discard=DiscardPolicy.OLD,
    )


def make_broker(settings: Settings, *, name: str) -> NatsBroker:
    """A faststream NATS broker configured from settings (auth and TLS included)."""
    tls = None
    if settings.nats_tls_ca is not None:
        tls = ssl.create_default_context(cafile=str(settings.nats_tls_ca))
    security: NatsSecurity | None = None
    if settings.nats_user is not None:
        security = NatsUserPassword(
            settings.nats_user, settings.nats_password or "", ssl_context=tls
        )
    elif tls is not None:
        security = NatsSecurity(ssl_context=tls)
    # A cluster is reached through any of its nodes: `nats_url` may list several, comma-separated.
    servers = [url.strip() for url in settings.nats_url.split(",") if url.strip()]
    return NatsBroker(
        servers,
        security=security,
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,  # type: ignore[arg-type]  # nats-py takes float seconds
        logger=None,
        apply_types=False,
        # A user's replies (PubAcks, JetStream API, pulls, replays, RPC) arrive under its
        # own inbox prefix, the only inboxes its permissions let it subscribe to.
        inbox_prefix=inbox_of(settings),
    )


def inbox_of(settings: Settings) -> str:
    """The inbox prefix this client's replies arrive under (private per NATS user)."""
    return inbox_prefix(settings.nats_user) if settings.nats_user else "_INBOX"


async def ensure_streams(js: JetStreamContext, settings: Settings) -> None:
    """Create the streams if missing; leave existing ones (and their data) alone."""
    for config in (event_stream(settings), dlq_stream(settings), lost_stream(settings)):
        try:
            await js.stream_info(config.name or "")
        except NotFoundError:
            await js.add_stream(config=config)


def _probe(url: str) -> str:
    """Why a TCP connection to `url` fails, or '' when something accepts it."""
    parsed = urlparse(url if "://" in url else f"nats://{url}")
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 4222), 1):
            return ""
    except OSError as e:
        return e.strerror or type(e).__name__


REFUSED_GRACE_S = 1.0
"""How long a one-shot command keeps trying servers that refuse outright (a stack that is
just starting) before it says so, instead of waiting out its whole connect timeout."""


async def refused_everywhere(url: str, grace_s: float = REFUSED_GRACE_S) -> bool:
    """Whether every server of `url` kept refusing TCP connections for `grace_s`: nothing
    listens there, so no wait will connect. An answer, a hang or a name that does not
    resolve is left to the client's own connect and its timeout."""
    servers = [u.strip() for u in url.split(",") if u.strip()]
    deadline = time.monotonic() + grace_s
    while True:
        if not all([await _refused(u) for u in servers]):
            return False
        if time.monotonic() >= deadline:
            return True
        await asyncio.sleep(0.2)


async def _refused(url: str) -> bool:
    parsed = urlparse(url if "://" in url else f"nats://{url}")
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(parsed.hostname or "127.0.0.1", parsed.port or 4222), 1.0
        )
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError, ValueError):
        return False
    writer.close()
    return False


def connect_error(
    settings: Settings, error: BaseException, timeout: float | None, *, streams: bool = False
) -> BusError:
    """One line for people: why connecting to NATS (or, with `streams`, looking up the
    streams right after) failed, and what to do about it. A remedy that is a command of
    the CLI is the CLI's to add, by the error's class."""
    url = settings.nats_url
    user = settings.nats_user
    text = str(error)
    if _credentials_refused(error):
        who = f"user {user!r} with this password" if user else "a client without credentials"
        return NotAuthenticated(
            f"NATS at {url} refused {who} (Authorization Violation): set ASSAY_NATS_USER and "
            "ASSAY_NATS_PASSWORD"
        )
    if not streams:
        servers = [u.strip() for u in url.split(",") if u.strip()]
        why = "; ".join(f"{u}: {r}" for u in servers if (r := _probe(u)))
        if not isinstance(error, TimeoutError):
            why = f"{type(error).__name__}: {text}"
        within = f" within {timeout:g}s" if timeout is not None else ""
        return NatsUnreachable(f"cannot reach NATS at {url}{within} ({why or 'no answer'})")
    as_user = f" as {user!r}" if user else ""
    return PermissionDenied(
        f"NATS at {url} did not let this client{as_user} use its JetStream API "
        f"({type(error).__name__}: {text or 'timeout'}): the user may lack the permission, "
        "or JetStream is off on that server"
    )


_REFUSED_CREDENTIALS = ("authorization violation", "authentication")
"""What the server's -ERR says when it refuses a client's credentials or their absence."""


def _credentials_refused(error: BaseException) -> bool:
    """Whether the server refused the client's credentials. nats-py names that by class
    once connected, but raises its bare `Error` with the server's -ERR line while
    connecting: the only place that line is read, so callers match `NotAuthenticated`."""
    if isinstance(error, AuthorizationError):
        return True
    if type(error) is not NatsError:
        return False
    text = str(error).lower()
    return any(words in text for words in _REFUSED_CREDENTIALS)
