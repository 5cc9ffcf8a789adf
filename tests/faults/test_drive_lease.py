"""A run's drive outliving its delivery: the runners' consumer leader lost mid-step.

The compose campaign (tests/deploy/test_compose_campaign.py) kills the stream leader's
node; the runners' durable often has its leader there. A new consumer leader delivers
the messages in progress again at once, however faithfully their handler sends
`in_progress` (seen here with nats-server: a second delivery within ~5 s, the first
handler still at work), so a second runner replica drives a run the first still drives.
The second reads the log, where the step the first is running is not yet, and runs that
step's commands again: the compose managers' logs showed such commands meeting the
run's end (a closed pipe: the sandbox destroyed under them), and one careful run's seal
then held results its checks read otherwise. What this asserts is the run invariant: a
step's commands run once, and the seal holds what the logged steps did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_runner.service import build as build_runner
from assay_schemas import AgentStepLogged, ArtifactsSealed, Event
from assay_testing import pipeline
from assay_testing.scripted import ScriptedSequence, ScriptReply

from .harness import started_bus
from .test_nats_faults import Cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

STEP_S = 8
"""Each step's command runs this long: longer than a new consumer leader takes to deliver
the run again (~5 s), so the second drive finds the step running and not yet logged."""
WORKER = ScriptedSequence(
    [
        ScriptReply.call("bash", {"command": f"echo step{i} >> ran.txt; sleep {STEP_S}"})
        for i in range(3)
    ]
    + [ScriptReply.call("submit", {"answer": "see ran.txt"})]
)


async def _until(bus: Bus, ok: Callable[[list[Event]], bool], timeout: float) -> list[Event]:
    """Poll the log until `ok` holds; a read failing while a leader is elected polls again."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            events = [e.event async for e in bus.replay()]
        except Exception:  # the stream's leader moving
            events = []
        if events and ok(events):
            return events
        kinds = [e.event_type for e in events]
        assert asyncio.get_running_loop().time() < deadline, f"not reached; log holds {kinds}"
        await asyncio.sleep(0.5)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "cluster")
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.xfail(
    strict=True,
    reason="open defect: a run delivered again while a runner still drives it (the durable's "
    "leader lost) is driven twice; nothing fences the older drive, so the step it was running "
    "runs again",
)
async def test_a_step_runs_once_when_the_runners_consumer_leader_is_lost(
    settings: Settings, tmp_path: Path, cluster: Cluster
) -> None:
    own = settings.model_copy(
        update={"nats_url": cluster.url, "stream_replicas": 3, "ack_wait_s": 30.0}
    )
    store = LocalBlobStore(own.blob_dir)
    folder = pipeline.write_task(tmp_path / "tasks", "t1", "go", {"a.txt": "x"})
    with pipeline.scripted_server({"worker": WORKER}) as models:
        spec = pipeline.campaign(
            "c1", [pipeline.scripted_agent("a1", "worker", models.openai_base_url)]
        )
        async with started_bus(own) as bus, pipeline.services(own, store):
            other = own.model_copy(update={"instance": "runner-b"})
            second = build_runner(other, store=store, providers=pipeline.fast_providers)
            await second.start()
            try:
                await pipeline.submit_folder(bus, store, spec, folder, max_bytes=1000)
                await _until(bus, lambda evs: any(isinstance(e, AgentStepLogged) for e in evs), 90)
                await asyncio.sleep(1)  # step 1's command is running
                durable = await bus.js.consumer_info(own.stream, "runner-runs")
                assert durable.cluster is not None and durable.cluster.leader
                cluster.nodes[durable.cluster.leader].kill()
                events = await _until(
                    bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs), 150
                )
            finally:
                await second.stop()
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
    ran = next(f for f in sealed.files if f.path == "ran.txt")
    assert store.get_bytes(ran.sha256).decode().split() == ["step0", "step1", "step2"]
