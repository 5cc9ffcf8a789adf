"""A run's model gateway on a folder, for the tests that talk to it over its socket."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from assay.store import LocalBlobStore
from assay_runner.gateway import Gateway
from assay_schemas import AgentSpec, AgentStepLogged, Limits

LogStep = Callable[[dict[str, Any]], Awaitable[AgentStepLogged]]


def recording() -> tuple[list[dict[str, Any]], LogStep]:
    """A step logger that keeps each logged call's fields, and the list it keeps them in."""
    logged: list[dict[str, Any]] = []

    async def log(fields: dict[str, Any]) -> AgentStepLogged:
        logged.append(fields)
        return AgentStepLogged.model_construct(**fields)

    return logged, log


@asynccontextmanager
async def serving(folder: Path, agent: AgentSpec, log_step: LogStep) -> AsyncIterator[Gateway]:
    """A started gateway for `agent` without limits or prices, its socket at
    folder/SOCKET_NAME and its blobs under folder/blobs; closed (the last step logged)
    on the way out."""
    gateway = Gateway(
        agent=agent,
        limits=Limits(),
        prices={},
        store=LocalBlobStore(folder / "blobs"),
        started_at=datetime.now(UTC),
        log_step=log_step,
    )
    await gateway.start(folder)
    try:
        yield gateway
    finally:
        await gateway.close()
