"""Consumer lag: how far each durable is behind the log, as an OpenTelemetry gauge."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Sequence

from nats.js import JetStreamContext
from opentelemetry.metrics import CallbackOptions, Observation

from assay.telemetry import meter

__all__ = ["LagWatch"]

log = logging.getLogger("assay.bus")

_LIVE: weakref.WeakSet[LagWatch] = weakref.WeakSet()


class LagWatch:
    """Pending + unacked messages per durable of one bus, refreshed while it consumes."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.lag: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self, js: JetStreamContext, durables: Sequence[str]) -> None:
        """Start refreshing (once); the gauge reports this watch from now on."""
        if self._task is None:
            _LIVE.add(self)
            self._task = asyncio.create_task(self._watch(js, list(durables)))

    def stop(self) -> None:
        """Stop refreshing."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _watch(
        self, js: JetStreamContext, durables: list[str], interval_s: float = 5.0
    ) -> None:
        while True:
            for durable in durables:
                try:
                    info = await js.consumer_info(self.stream, durable)
                    self.lag[durable] = int(info.num_pending or 0) + int(info.num_ack_pending or 0)
                except Exception:  # reconnecting: keep the last value
                    log.debug("consumer info for %s failed", durable, exc_info=True)
            await asyncio.sleep(interval_s)


def _observe(options: CallbackOptions) -> list[Observation]:
    """Consumer lag of every durable of every live bus."""
    return [
        Observation(lag, {"assay.durable": durable, "assay.stream": watch.stream})
        for watch in list(_LIVE)
        for durable, lag in watch.lag.items()
    ]


meter("assay.bus").create_observable_gauge(
    "assay.consumer.lag",
    callbacks=[_observe],
    unit="{message}",
    description="Messages a durable consumer has not processed yet",
)
