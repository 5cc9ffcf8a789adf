"""A service's subscriptions, registered from its contract (see `assay.contract`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from assay.contract import Consumer, fill
from assay_schemas import ConfigError, Event

from ._bus import Bus
from ._pulls import BatchPull, WorkerPull
from ._records import Delivery

__all__ = ["subscribe"]

E = TypeVar("E", bound=Event)


def subscribe(
    bus: Bus,
    consumer: Consumer[E],
    handler: Callable[[E, Delivery], Awaitable[None]],
    values: Mapping[str, str] | None = None,
    **options: Any,
) -> WorkerPull | BatchPull:
    """Register `consumer` on `bus` with `handler`: the filter subject and durable name come
    from the contract, `values` fill its placeholders, `options` go to `Bus.consume`."""
    durable = fill(consumer.durable, values or {})
    if durable == "*":
        raise ConfigError(f"durable {consumer.durable!r} needs a value for each placeholder")
    if consumer.event is Event:
        return bus.consume(bus.subjects.events, handler, durable=durable, **options)
    return bus.consume_event(consumer.event, handler, durable=durable, **options)
