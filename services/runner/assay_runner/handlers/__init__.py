"""Runner: schedule runs from campaigns and tasks; drive each run's agent in its sandbox."""

from __future__ import annotations

from dataclasses import dataclass

from .door import ADMISSIONS_IN_FLIGHT, admissions_in_flight
from .driver import Driver, ProviderFactory, RunGivenUp
from .waves import Waves

__all__ = [
    "ADMISSIONS_IN_FLIGHT",
    "ProviderFactory",
    "RunGivenUp",
    "RunnerService",
    "admissions_in_flight",
]


@dataclass(kw_only=True)
class RunnerService(Waves, Driver):
    """Turns campaigns and tasks into runs (wave by wave where a campaign says
    ``stopping:``), and runs into logged agent steps."""

    async def start(self) -> None:
        """Start consuming campaigns, tasks and ready sandboxes; resume wave campaigns."""
        await self.bus.start()
        await self.resume()

    async def stop(self) -> None:
        """Stop pacing and consuming, then close the providers' HTTP clients."""
        try:
            await self.stop_pacers()
            await self.bus.stop()
        finally:  # a bus that fails to stop must not leave the HTTP clients open
            await self.aclose()
