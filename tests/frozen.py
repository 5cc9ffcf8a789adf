"""A service instance frozen in the middle of a delivery, as SIGSTOP leaves one: its
own thread and event loop, blocked by its handler, so no heartbeat or ack goes out."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import TracebackType

from assay.bus import Bus, Delivery
from assay.config import Settings
from assay_schemas import Event


class FrozenInstance:
    """Consumes `durable` like a service instance; its handler's delivery number
    `freeze_at` blocks the instance's loop until `release` (earlier ones raise)."""

    def __init__(
        self,
        settings: Settings,
        *,
        durable: str,
        subject: Callable[[Bus], str],
        event_type: type[Event] = Event,
        freeze_at: int = 1,
    ) -> None:
        self.settings, self.durable, self.subject = settings, durable, subject
        self.event_type, self.freeze_at = event_type, freeze_at
        self.attempts: list[int] = []
        self.given_up: list[str] = []
        self.finished: list[int] = []
        self.frozen = threading.Event()
        self._started = threading.Event()
        self._release = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)
        self._error: BaseException | None = None

    async def _serve(self) -> None:
        bus = Bus(self.settings, service="frozen")

        async def handle(event: Event, delivery: Delivery) -> None:
            self.attempts.append(delivery.attempt)
            if delivery.attempt < self.freeze_at:
                raise RuntimeError(f"attempt {delivery.attempt} fails")
            self.frozen.set()
            self._release.wait()  # blocks this loop: no heartbeat, no ack
            self.finished.append(delivery.attempt)

        async def give_up(event: Event, delivery: Delivery, reason: str) -> None:
            self.given_up.append(reason)

        bus.consume(
            self.subject(bus),
            handle,
            durable=self.durable,
            event_type=self.event_type,
            on_give_up=give_up,
        )
        try:
            await bus.start()
        except BaseException as e:
            self._error = e
            raise
        finally:
            self._started.set()
        try:
            await asyncio.to_thread(self._stop.wait)
            await asyncio.sleep(1.0)  # the advisory it heard while frozen: handled
        finally:
            await bus.stop()

    async def __aenter__(self) -> FrozenInstance:
        self._thread.start()
        await asyncio.to_thread(self._started.wait, 30)
        if self._error is not None:
            raise self._error
        return self

    async def until_frozen(self, timeout: float = 60.0) -> None:
        if not await asyncio.to_thread(self.frozen.wait, timeout):
            raise AssertionError(f"{self.durable}: never took its freezing delivery")

    async def thaw_and_stop(self) -> None:
        """Let the frozen handler return (its ack comes too late), then stop the instance."""
        self._release.set()
        self._stop.set()
        await asyncio.to_thread(self._thread.join, 30)

    async def __aexit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.thaw_and_stop()
