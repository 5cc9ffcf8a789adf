"""A runner's model clients: one per agent spec, and one more per RUNS_PER_CLIENT runs in
flight on that spec."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from assay.providers import ModelProvider
from assay_schemas import AgentSpec

__all__ = ["RUNS_PER_CLIENT", "ModelClients"]

RUNS_PER_CLIENT = 32
"""A client's connection pool is searched on each request and release (httpx's walked every
connection; aiohttp's, now under the SDKs, is cheaper but still grows with the pool). Past
this many runs in flight a spec gets another client (its model's concurrency limiter is
shared by all of them, see `assay.providers`)."""


@dataclass
class _Client:
    provider: ModelProvider
    runs: int = 0


@dataclass
class ModelClients:
    """Leases a model client to each run; clients live until `aclose`."""

    make: Callable[[AgentSpec], ModelProvider]
    _by_spec: dict[str, list[_Client]] = field(default_factory=dict)

    @contextmanager
    def lease(self, agent: AgentSpec) -> Iterator[ModelProvider]:
        """The least busy client of the spec (a new one when all are full) for one run."""
        clients = self._by_spec.setdefault(agent.model_dump_json(), [])
        client = min(clients, key=lambda c: c.runs, default=None)
        if client is None or client.runs >= RUNS_PER_CLIENT:
            client = _Client(self.make(agent))
            clients.append(client)
        client.runs += 1
        try:
            yield client.provider
        finally:
            client.runs -= 1

    async def aclose(self) -> None:
        """Close every client's HTTP connections."""
        for clients in self._by_spec.values():
            for client in clients:
                await client.provider.aclose()
        self._by_spec.clear()
