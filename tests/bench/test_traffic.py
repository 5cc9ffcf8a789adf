"""bench.traffic: each named connection's messages, read from a real nats-server's /connz."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats

from assay.embedded import NatsServer, find_free_port
from bench.traffic import Flow, flows, per_step, read_connz


def test_flows_count_what_each_named_connection_published_and_received(tmp_path: Path) -> None:
    monitor = find_free_port("127.0.0.1")
    with NatsServer(tmp_path / "nats", extra_args=("-m", str(monitor))) as server:
        url = f"http://127.0.0.1:{monitor}"
        before = flows(read_connz(url), ["svc-a", "svc-b", "nobody"])
        assert before == {}  # nobody connected yet; a name with no connection is left out

        async def run_and_read() -> dict[str, Flow]:
            names = ["svc-a", "svc-b"]
            a = await nats.connect(server.url, name="svc-a")
            b = await nats.connect(server.url, name="svc-b")
            try:
                work = await b.subscribe("work")
                await b.flush()
                start = flows(await asyncio.to_thread(read_connz, url), names)
                for _ in range(5):
                    await a.publish("work", b"x")
                await a.flush()
                for _ in range(5):
                    await work.next_msg(timeout=30)
                end = flows(await asyncio.to_thread(read_connz, url), names)
            finally:
                await a.close()
                await b.close()
            return {name: end[name].since(start[name]) for name in end}

        moved = asyncio.run(run_and_read())
    assert moved["svc-a"] == Flow(published=5, delivered=0)
    assert moved["svc-b"] == Flow(published=0, delivered=5)


def test_per_step_divides_the_difference_and_skips_connections_not_seen_before() -> None:
    before = {"runner": Flow(10, 20), "gone": Flow(1, 1)}
    after = {"runner": Flow(40, 50), "new": Flow(9, 9)}
    assert per_step(before, after, 10) == {"runner": (3.0, 3.0)}
    assert per_step(before, after, 0) == {"runner": (30.0, 30.0)}  # no step: per one


def test_connections_sharing_a_name_are_summed() -> None:
    connz = {
        "connections": [
            {"name": "svc", "in_msgs": 3, "out_msgs": 4},
            {"name": "svc", "in_msgs": 1, "out_msgs": 1},
            {"name": "other", "in_msgs": 100, "out_msgs": 100},
            {"in_msgs": 7, "out_msgs": 7},
        ]
    }
    assert flows(connz, ["svc"]) == {"svc": Flow(4, 5)}
