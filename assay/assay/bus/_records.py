"""What the bus hands back: where a publish landed, what a handler is given, what it refused."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from assay_schemas import Event

__all__ = ["Delivery", "GiveUpSink", "Published", "Refusal", "RefusalSink", "Unchanged"]


class Published(NamedTuple):
    """Where an event landed in the log."""

    sequence: int
    duplicate: bool


class Unchanged(NamedTuple):
    """A publish's condition: the last message on `subject` is still the one at
    `last_sequence` (0: there is none), as when it was read. JetStream checks it as it
    stores the event, so of two instances deciding on the same reads only one is logged."""

    subject: str
    last_sequence: int


class Delivery(NamedTuple):
    """Where the event a handler is working on sits in the log, and how it arrived."""

    sequence: int
    attempt: int
    subject: str = ""
    headers: Mapping[str, str] = MappingProxyType({})
    data: bytes = b""
    """The message's bytes as stored (what its signature covers)."""
    signer: str = ""
    """Who signed it, as the bus checked before handing it over (`role/name (key)`);
    empty when this deployment checks no signatures."""


class Refusal(NamedTuple):
    """A stored message a consumer could not take as an event, and why."""

    sequence: int
    subject: str
    reason: str
    data: bytes = b""
    """The refused message's bytes (to answer its sender, never to act on)."""
    headers: Mapping[str, str] = MappingProxyType({})
    """Its headers (`Nats-Msg-Id` names a body too broken to name itself)."""
    event: Event | None = None
    """The event it parsed to, when only its signature was refused (to record or answer
    the refusal as the consumer would, never to act on)."""


RefusalSink = Callable[[Refusal], Awaitable[None]]

GiveUpSink = Callable[["Event", Delivery, str], Awaitable[None]]
"""Told of an event its consumer gave up on after its last delivery (with the reason),
before it is dead-lettered: where a run must be ended rather than left hanging."""
