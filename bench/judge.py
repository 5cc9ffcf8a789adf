"""Judge rows: judgments per minute with a zero-latency scripted judge, blob bytes read.

N sealed runs are published straight to a fresh embedded nats-server; one judge (its
model answered instantly by the scripted server through the real OpenAI SDK) reads a
table and submits a verdict for each. The blob store is wrapped to count bytes read.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from pydantic import JsonValue

from assay.bus import Bus, Delivery
from assay.config import Settings
from assay.embedded import NatsServer
from assay.store import LocalBlobStore
from assay_judge.files import CountingStore
from assay_judge.service import build, build_rules
from assay_schemas import (
    RULES_JUDGE_ID,
    AgentSpec,
    ArtifactsSealed,
    CampaignSpec,
    CampaignStarted,
    Event,
    FileRef,
    JudgeSpec,
    JudgmentRecorded,
    Limits,
    RunEnvelope,
    RunRequested,
    SandboxSpec,
    Task,
    default_rubric,
)
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply
from bench.table import Row

__all__ = ["bench_judge"]

KEY_ENV = "ASSAY_BENCH_SCRIPTED_KEY"
AGENT = AgentSpec(agent_id="bench-agent", model="bench-agent")


def _script() -> ScriptedSequence:
    rubric = default_rubric()
    verdict: dict[str, JsonValue] = {
        "scores": {k: {"score": 7, "reason": "fine"} for k in rubric.dimension_keys},
        "failure_tags": [],
        "rationale": "Checked the table.",
        "files_relied_on": ["results/table.csv"],
    }
    return ScriptedSequence(
        [
            ScriptReply.call("read_table", {"path": "results/table.csv"}),
            ScriptReply.call("submit_verdict", verdict),
        ]
    )


def _runs(bus: Bus, store: LocalBlobStore, n: int) -> tuple[list[Event], int]:
    table = "gene,count\n" + "".join(f"g{i},{i * 7 % 1000}\n" for i in range(2000))
    script = b"import pandas as pd\nprint(pd.read_csv('results/table.csv').describe())\n"
    events: list[Event] = []
    sealed_bytes = 0
    for i in range(n):
        # Each run's files differ, so no blob is shared between runs.
        refs = []
        for path, data in (
            ("results/table.csv", f"{table}run,{i}\n".encode()),
            ("analysis.py", script),
        ):
            info = store.put_bytes(data)
            refs.append(FileRef(path=path, sha256=info.sha256, size=info.size))
        sealed_bytes += sum(r.size for r in refs)
        run = f"run{i}"
        common = RunEnvelope(campaign_id="bench", run_id=run, task_id="t", causation_id=None)
        task = Task(task_id="t", prompt="Count genes and summarise.")
        events.append(
            RunRequested(
                event_id=RunRequested.id_for(run),
                task=task,
                agent=AGENT,
                epoch=0,
                limits=Limits(),
                sandbox=SandboxSpec(),
                **common,
                producer=bus.producer,
            )
        )
        events.append(
            ArtifactsSealed(
                event_id=ArtifactsSealed.id_for(run),
                files=refs,
                final_message="Counts are in results/table.csv; mean 499.5.",
                agent_id=AGENT.agent_id,
                epoch=0,
                **common,
                producer=bus.producer,
            )
        )
    return events, sealed_bytes


async def _count(settings: Settings, judge_id: str, n: int) -> tuple[Bus, asyncio.Event]:
    done = asyncio.Event()
    seen: set[str] = set()

    async def on(event: JudgmentRecorded, delivery: Delivery) -> None:
        if event.judge_id == judge_id:
            seen.add(event.event_id)
            if len(seen) >= n:
                done.set()

    counter = Bus(settings, service=f"bench-count-{judge_id}")
    counter.consume(
        counter.subjects.event("JudgmentRecorded"),
        on,
        durable=f"bench-count-{judge_id}",
        event_type=JudgmentRecorded,
        max_workers=16,
    )
    await counter.start()
    return counter, done


async def _run(n: int, concurrency: int) -> list[Row]:
    os.environ.setdefault(KEY_ENV, "bench")
    with (
        tempfile.TemporaryDirectory() as tmp,
        NatsServer(Path(tmp) / "nats") as server,
        ScriptedModelServer({"bench-judge": _script()}) as models,
    ):
        settings = Settings(nats_url=server.url, home=Path(tmp))
        store = CountingStore(LocalBlobStore(Path(tmp) / "blobs"))
        spec = JudgeSpec(
            judge_id="bench-judge",
            model="bench-judge",
            base_url=models.openai_base_url,
            api_key_env=KEY_ENV,
            max_concurrency=concurrency,
        )
        campaign = CampaignSpec(campaign_id="bench", agents=[AGENT], judges=[spec])
        async with Bus(settings, service="bench") as bus:
            await bus.publish(
                CampaignStarted(
                    event_id=CampaignStarted.id_for("bench"),
                    campaign_id="bench",
                    campaign=campaign,
                    producer=bus.producer,
                )
            )
            events, sealed_bytes = _runs(bus, store.inner, n)  # type: ignore[arg-type]
            for event in events:
                await bus.publish(event)
            rows: list[Row] = []
            for label, service in (
                ("LLM judge (scripted, 0 latency)", build(settings, spec, store=store)),
                ("rule judge", build_rules(settings, store=store, concurrency=concurrency)),
            ):
                judge_id = RULES_JUDGE_ID if "rule" in label else spec.judge_id
                counter, done = await _count(settings, judge_id, n)
                before = store.bytes_read
                t0 = time.perf_counter()
                await service.start()
                await asyncio.wait_for(done.wait(), 600)
                elapsed = time.perf_counter() - t0
                await service.stop()
                await counter.stop()
                rows.append(
                    Row("judge", f"{label}: back-fill {n} runs", n / elapsed * 60, "judgments/min")
                )
                rows.append(
                    Row(
                        "judge",
                        f"{label}: blob bytes read per judgment",
                        (store.bytes_read - before) / n,
                        "bytes",
                        sealed_bytes / n,
                        "sealed bytes per run",
                    )
                )
    return rows


def bench_judge(n: int = 200, concurrency: int = 8) -> list[Row]:
    """Back-fill throughput and blob bytes read per judgment, LLM judge and rule judge."""
    return asyncio.run(_run(n, concurrency))
