"""The runner's model clients: a new client per RUNS_PER_CLIENT runs in flight on a spec."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from assay.providers import ModelProvider, provider_for
from assay_runner.clients import RUNS_PER_CLIENT, ModelClients
from assay_schemas import AgentSpec

pytestmark = pytest.mark.timeout(20)

AGENT = AgentSpec(agent_id="a", model="m", base_url="http://127.0.0.1:9/v1")


async def test_runs_past_the_share_of_one_client_get_another() -> None:
    made: list[ModelProvider] = []

    def make(agent: AgentSpec) -> ModelProvider:
        made.append(provider_for(agent))
        return made[-1]

    clients = ModelClients(make)
    with ExitStack() as runs:
        leased = [runs.enter_context(clients.lease(AGENT)) for _ in range(RUNS_PER_CLIENT)]
        assert len(made) == 1 and set(map(id, leased)) == {id(made[0])}
        extra = runs.enter_context(clients.lease(AGENT))
        assert len(made) == 2 and extra is made[1]
        other = runs.enter_context(clients.lease(AGENT.model_copy(update={"model": "m2"})))
        assert len(made) == 3 and other is made[2]
    # Every run ended: the next one takes the least busy existing client, no new one.
    with clients.lease(AGENT) as again:
        assert again in made[:2] and len(made) == 3
    await clients.aclose()
