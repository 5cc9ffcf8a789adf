"""The log itself fails: nats-server killed and restarted, a node of a 3-node cluster lost."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.bus import publish_through_outages
from assay.config import Settings
from assay.embedded import NatsServer, find_free_port, find_free_ports
from assay.store import open_store
from assay_schemas import AgentStepLogged, Event, Producer

from .harness import (
    Baseline,
    Cast,
    ServiceSet,
    campaign_complete,
    check_against_baseline,
    started_bus,
    wait_until,
)

pytestmark = pytest.mark.timeout(240)

OUTAGE_S = 3.0


def _mid_run(evs: list[Event]) -> bool:
    return any(isinstance(e, AgentStepLogged) and e.step >= 1 for e in evs)


@pytest.mark.slow
async def test_nats_server_killed_and_restarted_on_its_data_dir(
    settings: Settings, cast: Cast, base: Baseline, tmp_path: Path
) -> None:
    # Its own server on a fixed port: the restarted one must be found where clients look.
    server = NatsServer(tmp_path / "nats", port=find_free_port())
    server.start()
    try:
        own = settings.model_copy(update={"nats_url": server.url})
        async with started_bus(own) as bus, ServiceSet.running(own, cast) as services:
            await cast.submit(bus, open_store(own))
            before = await wait_until(
                bus, _mid_run, timeout=90, services=services, what="runs mid-way"
            )
            server.kill()
            print(
                f"\n[nats restart] nats-server SIGKILLed after {len(before)} events; down {OUTAGE_S}s"
            )
            await asyncio.sleep(OUTAGE_S)
            server.start()
            await wait_until(
                bus,
                campaign_complete(cast.run_ids),
                timeout=150,
                services=services,
                what="a complete campaign after the server restart",
            )
            await check_against_baseline(bus, base, label="nats restart")
    finally:
        server.stop()


async def test_a_step_published_through_an_outage_is_logged_once(
    settings: Settings, tmp_path: Path
) -> None:
    """A step whose tools ran is published again while the log is down, not run again
    (the compose campaign's careful run came out different when its drive was rerun after
    a leader election): once the server is back the step is stored, once."""
    server = NatsServer(tmp_path / "nats", port=find_free_port())
    server.start()
    try:
        own = settings.model_copy(update={"nats_url": server.url})
        async with started_bus(own) as bus:
            first = AgentStepLogged(
                event_id=AgentStepLogged.id_for("r1", 0),
                campaign_id="c1",
                run_id="r1",
                step=0,
                producer=Producer(service="test", version="0"),
            )
            await bus.publish(first)
            server.kill()
            again = first.model_copy(
                update={"event_id": AgentStepLogged.id_for("r1", 1), "step": 1}
            )
            publishing = asyncio.create_task(publish_through_outages(bus, again))
            await asyncio.sleep(OUTAGE_S)
            assert not publishing.done(), "the publish must wait out the outage"
            server.start()
            published = await asyncio.wait_for(publishing, timeout=60)
            assert not published.duplicate
            await bus.publish(again)  # a later retry of the same step: stored once
            steps = [e.event async for e in bus.replay() if isinstance(e.event, AgentStepLogged)]
    finally:
        server.stop()
    assert [s.step for s in steps] == [0, 1]


class Cluster:
    """Three nats-server nodes with JetStream, routed to each other on loopback."""

    def __init__(self, root: Path) -> None:
        # Six distinct ports, picked together: the nodes bind them one after another.
        picked = find_free_ports(6)
        self.ports, routes = picked[:3], picked[3:]
        self.nodes: dict[str, NatsServer] = {}
        for i, (port, route) in enumerate(zip(self.ports, routes, strict=True)):
            name = f"n{i + 1}"
            folder = root / name
            folder.mkdir(parents=True)
            others = ", ".join(f"nats-route://127.0.0.1:{r}" for r in routes if r != route)
            conf = folder / "node.conf"
            # NatsServer passes -js -sd <folder>/js itself: the file names the rest.
            conf.write_text(
                f"server_name: {name}\n"
                f"cluster {{\n  name: assay-faults\n  listen: 127.0.0.1:{route}\n  routes: [{others}]\n}}\n"
            )
            self.nodes[name] = NatsServer(folder, port=port, config_file=conf)

    @property
    def url(self) -> str:
        """Every node's client URL, comma-separated (what `ASSAY_NATS_URL` takes)."""
        return ",".join(f"nats://127.0.0.1:{p}" for p in self.ports)

    def start(self) -> None:
        """Start every node."""
        for node in self.nodes.values():
            node.start()

    def stop(self) -> None:
        """Stop every node still running."""
        for node in self.nodes.values():
            node.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A fresh 3-node JetStream cluster owned by the test."""
    c = Cluster(tmp_path / "cluster")
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.slow
async def test_cluster_node_lost_and_back_with_r3_stream(
    settings: Settings, cast: Cast, base: Baseline, cluster: Cluster
) -> None:
    own = settings.model_copy(update={"nats_url": cluster.url, "stream_replicas": 3})
    async with started_bus(own) as bus, ServiceSet.running(own, cast) as services:
        info = await bus.js.stream_info(own.stream)
        assert info.config.num_replicas == 3
        await cast.submit(bus, open_store(own))
        before = await wait_until(bus, _mid_run, timeout=90, services=services, what="runs mid-way")
        # Lose the stream's leader: the hardest node to lose (a new leader must be elected).
        leader = (await bus.js.stream_info(own.stream)).cluster.leader  # type: ignore[union-attr]
        assert leader in cluster.nodes, leader
        cluster.nodes[leader].kill()
        print(
            f"\n[cluster] stream leader {leader} SIGKILLed after {len(before)} events; down {OUTAGE_S}s"
        )
        await asyncio.sleep(OUTAGE_S)
        cluster.nodes[leader].start()
        await wait_until(
            bus,
            campaign_complete(cast.run_ids),
            timeout=150,
            services=services,
            what="a complete campaign after losing a node",
        )
        placement = (await bus.js.stream_info(own.stream)).cluster
        assert placement is not None
        replicas = [r.name for r in placement.replicas or []]
        print(f"[cluster] stream leader now {placement.leader}, replicas {replicas}")
        await check_against_baseline(bus, base, label="cluster node lost")
