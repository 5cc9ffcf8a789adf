"""A campaign across machines on the deployment we ship: deploy/compose.yaml's services,
from the images the project builds, run the bundled campaign while a NATS node and a
sandbox-manager die, and end with the one-process run's report.

The deployment: three NATS nodes (the compose config, one R3 stream), two runners, two
sandbox-managers, the jury, the rule judge and the aggregator, each from its own image
(deploy/build-images.sh, cached by input hash), the blob store on S3 (moto's server
standing in for MinIO). No compose v2 plugin here, and no traffic may go to a container's
bridge address, so `_compose` runs each service as the compose file writes it, on the
host network (see there for the few network settings it changes).

Mid-campaign (once a first run is sealed) the stream's leader node and one
sandbox-manager are killed (SIGKILL); the node stays down, the manager's machine comes
back 15 s later (Docker does not restart a killed container by its restart policy). Every run must end judged by every judge, or as an infrastructure failure
that a retry (`assay retry`) takes to judged; the report of the log, wall-clock figures
and the failed attempts' accounting aside, must equal the one-process run's.

Marked ``docker`` and ``slow``: dockerd, the images and several minutes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assay.bus import Bus
from assay.campaign import load_campaign, submit_campaign
from assay.config import Settings
from assay.embedded import find_free_port
from assay.retry import retry_failed
from assay.security.controls import controls_key
from assay.service import Service, build_service
from assay.store import open_store
from assay.tasks import TaskDraft, load_tasks
from assay_schemas import (
    RULES_JUDGE_ID,
    ArtifactsSealed,
    CampaignSpec,
    ControlDeclared,
    Event,
    JudgmentRecorded,
    RunFailed,
    RunRequested,
)
from assay_testing.demo import SCRIPTED_KEY_ENV, agent_scripts, judge_scripts, scripted_campaign
from assay_testing.scripted import ScriptedModelServer
from tests.faults.harness import report_figures

from ._compose import Container, NatsNode, deployment, wait_healthy

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SANDBOX_MOUNTS = Path("/var/tmp/assay")
SERVICES = ("aggregator", "rules", "jury", "sandbox-manager", "runner")
"""Started in this order (each after the stream exists): consumers before producers."""
ONE_PROCESS = ("sandbox-manager", "runner", "rules", "jury", "aggregator")
"""The services `assay run` embeds, in its start order (tests/cli/test_up.py holds the
CLI's stack to this)."""
DURABLES = ("aggregator", "judge-rules", "sandbox-manager-runs", "runner-runs")
REPLICAS = {"RUNNERS": "2", "SANDBOX_MANAGERS": "2"}

Slot = tuple[str, str, int]


class Campaign:
    """The bundled campaign, every model pointed at one scripted server."""

    def __init__(self, models: ScriptedModelServer, settings: Settings) -> None:
        spec = load_campaign(EXAMPLES / "campaign.yaml")
        # Controls play the variants declared for them: a control that chooses its plan
        # at its first step follows the agents' runs seen by then, so two campaigns whose
        # runs ran in another order would hold other controls (and other validity rates).
        assert spec.controls is not None
        controls = spec.controls.model_copy(update={"like_agents": False})
        spec = spec.model_copy(update={"controls": controls})
        self.spec: CampaignSpec = scripted_campaign(spec, models.openai_base_url)
        self.drafts: list[TaskDraft] = load_tasks(
            EXAMPLES / "tasks", max_bytes=settings.max_attachment_bytes
        )
        self.judges = {j.judge_id for j in self.spec.judges} | {RULES_JUDGE_ID}
        self.n_slots = len(self.drafts) * len(self.spec.agents) * self.spec.epochs


class Progress:
    """Where the campaign stands in a log: each slot's latest attempt, judged or failed."""

    def __init__(self, campaign: Campaign, events: list[Event]) -> None:
        latest: dict[Slot, RunRequested] = {}
        for e in events:
            if isinstance(e, RunRequested):
                slot = (e.task.task_id, e.agent.agent_id, e.epoch)
                if slot not in latest or e.attempt > latest[slot].attempt:
                    latest[slot] = e
        judged = {(e.run_id, e.judge_id) for e in events if isinstance(e, JudgmentRecorded)}
        self.infra_failed = {
            e.run_id for e in events if isinstance(e, RunFailed) and e.infrastructure
        }
        self.any_failed = {e.run_id for e in events if isinstance(e, RunFailed)}
        self.sealed = {e.run_id for e in events if isinstance(e, ArtifactsSealed)}
        self.latest = {r.run_id for r in latest.values()}
        self.judged = {r for r in self.latest if all((r, j) in judged for j in campaign.judges)}
        # The campaign declares controls: each is one more slot (declared at submission,
        # sealed: a declaration is counted, never opened, here).
        controls = {e.event_id for e in events if isinstance(e, ControlDeclared)}
        n_slots = campaign.n_slots + len(controls)
        self.complete = len(latest) == n_slots and self.judged == self.latest
        # Settled: nothing more will happen without a retry.
        self.settled = len(latest) == n_slots and all(
            r in self.judged or r in self.infra_failed for r in self.latest
        )

    @property
    def retryable(self) -> set[str]:
        """Latest attempts that ended in an infrastructure failure."""
        return self.latest & self.infra_failed


async def _events(bus: Bus) -> list[Event]:
    try:
        return [e.event async for e in bus.replay()]
    except Exception:  # a node is down or the leader moving: poll again
        return []


async def _until(
    bus: Bus, ok: Callable[[list[Event]], bool], timeout: float, what: str, logs: Callable[[], str]
) -> list[Event]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        events = await _events(bus)
        if events and ok(events):
            return events
        if asyncio.get_running_loop().time() > deadline:
            kinds: dict[str, int] = {}
            for e in events:
                kinds[e.event_type] = kinds.get(e.event_type, 0) + 1
            pytest.fail(f"never reached {what} in {timeout:.0f}s; log holds {kinds}\n{logs()}")
        await asyncio.sleep(1.0)


async def _until_judged(
    bus: Bus, campaign: Campaign, *, timeout: float, logs: Callable[[], str]
) -> tuple[Progress, int]:
    """Wait for every run judged; retry infrastructure failures once settled. Returns the
    final progress and how many retries were requested."""
    retried = 0
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        remaining = deadline - asyncio.get_running_loop().time()
        events = await _until(
            bus, lambda ev: Progress(campaign, ev).settled, remaining, "a settled campaign", logs
        )
        progress = Progress(campaign, events)
        if progress.complete:
            return progress, retried
        requests = await retry_failed(bus, campaign=campaign.spec.campaign_id)
        assert requests, f"settled with failures no retry takes: {progress.retryable}"
        retried += len(requests)


def _comparable(figures: bytes, retried: bool) -> dict[str, Any]:
    """The report without what a failed-and-retried attempt rightly adds: its row in the
    run accounting (runs, states, infrastructure failures, their causes among the
    problems and warnings). Every score, interval, rate and verdict figure stays: the
    statistics use each slot's latest attempt."""
    doc: dict[str, Any] = json.loads(figures)
    # What a judge read costs tokens: a command that met the outage leaves its error in the
    # transcript the judge reads (one run's prompt came out 385 tokens longer), while every
    # verdict and score must still be the one-process run's.
    doc.pop("judge_costs", None)
    # Likewise what an agent read: tool output can name the deployment's own instances, and
    # can depend on the machine's load: matplotlib warns on stderr that it is building its
    # font cache when that takes over 5 s (each sandbox builds its own), which the careful
    # agent's `python3 solve.py` met in the loaded cluster (16 input tokens more on one
    # run's next step). So the prompt-cache table keeps its rows, not their token figures.
    doc["statistics"].pop("run_costs")
    doc["prompt_cache"] = [
        {key: row[key] for key in ("role", "member_id", "model", "n")}
        for row in doc["prompt_cache"]
    ]
    # A control run imitates its look-alike's runs as the runner replica driving it saw
    # them (`assay_runner.book`): with two replicas its step count, and so the log's
    # length, depends on which replica ran what. Its files and verdicts do not.
    doc.pop("log_sequence")
    if retried:
        for key in ("run_states", "infrastructure_failures", "problems"):
            doc.pop(key)
        for agent in doc["agents"]:
            del agent["n_runs"], agent["n_infrastructure_failures"]
        stats = doc["statistics"]
        del stats["run_accounting"]
        stats["warnings"] = [w for w in stats["warnings"] if "infrastructure" not in str(w)]
    return doc


@pytest.fixture(scope="module")
def models() -> Any:
    """The scripted model server the bundled campaign's agents and judges call."""
    server = ScriptedModelServer({**agent_scripts(EXAMPLES), **judge_scripts()}).start()
    os.environ.setdefault(SCRIPTED_KEY_ENV, "scripted")
    try:
        yield server
    finally:
        server.stop()


async def _one_process(settings: Settings, campaign: Campaign) -> tuple[bytes, list[Event]]:
    """The bundled campaign on the embedded stack (every service in this process): its
    report's figures and its log."""
    store = open_store(settings)
    started: list[Service] = []
    try:
        for name in ONE_PROCESS:
            service = build_service(name, settings, store=store)
            await service.start()
            started.append(service)
        async with Bus(settings, service="test") as bus:
            await submit_campaign(bus, store, campaign.spec, campaign.drafts)
            await _until_judged(bus, campaign, timeout=600, logs=lambda: "")
            return await report_figures(bus), await _events(bus)
    finally:
        for service in reversed(started):
            await service.stop()


def _differences(want: Any, got: Any, path: str = "") -> list[str]:
    """Where two JSON documents differ, one line per differing leaf."""
    if isinstance(want, dict) and isinstance(got, dict):
        return [
            line
            for key in sorted(set(want) | set(got), key=str)
            for line in _differences(want.get(key), got.get(key), f"{path}.{key}")
        ]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [
            line
            for i, (w, g) in enumerate(zip(want, got, strict=True))
            for line in _differences(w, g, f"{path}[{i}]")
        ]
    return [] if want == got else [f"{path}: one process {want!r:.400} / cluster {got!r:.400}"]


def _dump_mismatch(
    want: dict[str, Any], got: dict[str, Any], logs: dict[str, list[Event] | str]
) -> Path:
    """On a mismatch: where the reports differ, both logs (every event whole) and the
    containers' output, in a folder under /tmp to read after the run."""
    out = Path(f"/tmp/compose_mismatch_{os.getpid()}_{int(time.time())}")
    out.mkdir(parents=True)
    (out / "differences.txt").write_text("\n".join(_differences(want, got)) + "\n")
    for name, content in logs.items():
        if isinstance(content, str):
            (out / f"{name}.txt").write_text(content)
        else:
            lines = (e.model_dump_json() for e in content)
            (out / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return out


def _shared_sandbox_mounts() -> None:
    """The compose file mounts /var/tmp/assay with rshared propagation, which needs it on a
    shared mount (systemd hosts have / shared; this one may not): bind it onto itself."""
    SANDBOX_MOUNTS.mkdir(parents=True, exist_ok=True)
    prop = subprocess.run(
        ["findmnt", "-no", "PROPAGATION", "--target", str(SANDBOX_MOUNTS)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if prop and prop[0] == "shared":
        return
    own = subprocess.run(["findmnt", "-no", "TARGET", str(SANDBOX_MOUNTS)], capture_output=True)
    if own.returncode != 0:
        subprocess.run(["mount", "--bind", str(SANDBOX_MOUNTS), str(SANDBOX_MOUNTS)], check=True)
    subprocess.run(["mount", "--make-rshared", str(SANDBOX_MOUNTS)], check=True)


async def _consumers_ready(bus: Bus, stream: str, logs: Callable[[], str]) -> None:
    deadline = asyncio.get_running_loop().time() + 180
    missing = list(DURABLES)
    while missing:
        for durable in list(missing):
            try:
                await bus.js.consumer_info(stream, durable)
                missing.remove(durable)
            except Exception:
                pass
        if missing and asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"consumers never registered: {missing}\n{logs()}")
        await asyncio.sleep(1.0)


async def test_bundled_campaign_across_machines_survives_a_node_and_a_manager(
    images: dict[str, str],
    models: ScriptedModelServer,
    settings: Settings,
    s3_endpoint: str,
    tmp_path: Path,
) -> None:
    campaign = Campaign(models, settings)
    want, want_events = await _one_process(settings, campaign)

    _shared_sandbox_mounts()
    nodes = [NatsNode(i, find_free_port(), find_free_port(), find_free_port()) for i in (1, 2, 3)]
    urls = ",".join(n.url for n in nodes)
    state = SANDBOX_MOUNTS / "state" / tmp_path.name
    overrides = {
        "ASSAY_NATS_URL": urls,
        "ASSAY_S3_ENDPOINT": s3_endpoint,
        "ASSAY_STATE_DIR": str(state),  # inside the compose mount; this test's own
        "ASSAY_ACK_WAIT_S": "30",  # a dead replica's work is redelivered in 30 s, not 5 min
        SCRIPTED_KEY_ENV: "scripted",
    }
    cluster = Settings(
        nats_url=urls,
        stream_replicas=3,
        store="s3",
        s3_endpoint=s3_endpoint,
        home=tmp_path / "cluster",
        ack_wait_s=30,
        # The one-process run's controls secret: a campaign's control salt is an HMAC of
        # its id under it, and the salt deals the look-alikes and places the controls. With
        # each home's own secret, the two campaigns held different controls, and the
        # validity figures (every rate over controls) differed in about one run of three,
        # whatever the faults did.
        controls_secret=controls_key(settings).secret.hex(),
    )
    with deployment(images, overrides) as d:
        nats = d.nats(nodes, REPLICAS)
        for node in nodes:
            wait_healthy(node)
        async with Bus(cluster, service="test") as bus:  # makes the R3 stream
            info = await bus.js.stream_info(cluster.stream)
            assert info.config.num_replicas == 3
            started: dict[str, list[Container]] = {}
            # The runner and the aggregator open the declarations this home seals.
            opens = {**REPLICAS, "ASSAY_CONTROLS_SECRET": controls_key(cluster).secret.hex()}
            for name in SERVICES:
                started[name] = d.service(name, opens)
            assert len(started["runner"]) == len(started["sandbox-manager"]) == 2
            await _consumers_ready(bus, cluster.stream, d.logs)

            await submit_campaign(bus, open_store(cluster), campaign.spec, campaign.drafts)
            await _until(
                bus,
                lambda ev: any(isinstance(e, ArtifactsSealed) for e in ev),
                600,
                "a first sealed run",
                d.logs,
            )
            leader = (await bus.js.stream_info(cluster.stream)).cluster
            assert leader is not None and leader.leader
            victim = nats[int(leader.leader.rsplit("-", 1)[-1]) - 1]
            victim.kill()
            manager = started["sandbox-manager"][0]
            manager.kill()
            mid = Progress(campaign, await _events(bus))
            assert not mid.complete, "the faults must land mid-campaign"
            # The manager's machine comes back (the NATS node stays down: two of three
            # hold the stream). Seals owed by its sandboxes are its own work: a run that
            # finished there waits for it (its exec requests fail over as infrastructure
            # failures at once, see the runner).
            await asyncio.sleep(15)
            manager.start()

            final, retried = await _until_judged(bus, campaign, timeout=1200, logs=d.logs)
            got = await report_figures(bus)
            got_events = await _events(bus)
            info = await bus.js.stream_info(cluster.stream)
            assert info.config.num_replicas == 3
            container_logs = d.logs(10_000_000)
    print(
        f"\ncompose campaign: {len(final.latest)} runs judged, killed {victim.name} (stream "
        f"leader) and {manager.name} with {len(mid.judged)} runs judged; "
        f"{retried} infrastructure failure(s) retried"
    )
    got_doc, want_doc = _comparable(got, retried > 0), _comparable(want, retried > 0)
    if got_doc != want_doc:
        logs = {"one_process": want_events, "cluster": got_events, "containers": container_logs}
        where = _dump_mismatch(want_doc, got_doc, logs)
        pytest.fail(f"the cluster's report differs from the one-process run's; see {where}")
