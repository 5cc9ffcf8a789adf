"""Runner: schedule runs from campaigns and tasks; drive each run's agent in its sandbox."""

from __future__ import annotations

from dataclasses import dataclass

from .door import ADMISSIONS_IN_FLIGHT, Door
from .driver import Driver, ProviderFactory, RunGivenUp

__all__ = ["ADMISSIONS_IN_FLIGHT", "ProviderFactory", "RunGivenUp", "RunnerService"]


@dataclass(kw_only=True)
class RunnerService(Door, Driver):
    """Turns campaigns and tasks into runs, and runs into logged agent steps."""

    async def start(self) -> None:
        """Start consuming campaigns, tasks and ready sandboxes."""
        await self.bus.start()

    async def stop(self) -> None:
        """Stop consuming, then close the providers' HTTP clients."""
        await self.bus.stop()
        await self.aclose()
