"""One trace per run across four service processes, carried in NATS headers, exported by
OTLP/HTTP to the endpoint alone (no OTEL_TRACES_EXPORTER: an endpoint means OTLP)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_schemas import JudgeSpec, JudgmentRecorded, RunRequested
from assay_testing.demo import JudgeTemper, judge_script
from assay_testing.pipeline import (
    SCRIPTED_KEY,
    campaign,
    scripted_agent,
    service_process,
    wait_for_events,
    write_task,
)
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

from .otlp_receiver import OtlpReceiver

# A judge traces under its own name (assay-judge-<judge id>), so a trace shows every juror.
SERVICES = ("assay-sandbox-manager", "assay-runner", "assay-judge-j1", "assay-aggregator")


@pytest.fixture
def scripted() -> Iterator[ScriptedModelServer]:
    os.environ[SCRIPTED_KEY] = "scripted"
    agent = ScriptedSequence(
        [
            ScriptReply.call(
                "bash", {"command": "mkdir -p results && sort data.csv > results/sorted.csv"}
            ),
            ScriptReply.call("submit", {"answer": "Sorted table in results/sorted.csv."}),
        ]
    )
    with ScriptedModelServer(
        {"tracer": agent, "judge-model": judge_script(JudgeTemper("j1", 0))}
    ) as server:
        yield server


@pytest.mark.slow
async def test_one_run_is_one_trace_across_four_processes(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    store = LocalBlobStore(settings.blob_dir)
    judge = JudgeSpec(
        judge_id="j1",
        model="judge-model",
        base_url=scripted.openai_base_url,
        api_key_env=SCRIPTED_KEY,
        family="x",
    )
    spec_file = tmp_path / "judge.yaml"
    spec_file.write_text(yaml.safe_dump(judge.model_dump(mode="json")))
    spec = campaign(
        "traced", [scripted_agent("a1", "tracer", scripted.openai_base_url)], judges=[judge]
    )
    folder = write_task(tmp_path / "tasks", "sortme", "sort my table", {"data.csv": "b\na\nc\n"})
    with OtlpReceiver() as receiver:
        otel = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_METRIC_EXPORT_INTERVAL": "500",
        }
        async with (
            service_process("sandbox-manager", settings, env=otel),
            service_process("runner", settings, env=otel),
            service_process("judge", settings, "--judge", str(spec_file), env=otel),
            service_process("aggregator", settings, env=otel),
        ):
            await submit_campaign(bus, store, spec, load_tasks(folder, max_bytes=10_000))
            events = await wait_for_events(
                bus,
                lambda evs: any(
                    isinstance(e, JudgmentRecorded) and e.judge_id == "j1" for e in evs
                ),
                timeout=120,
            )
        # Leaving the block stops each service with SIGTERM, which flushes its spans.
        run_id = next(e.run_id for e in events if isinstance(e, RunRequested))
        roots = [s for s in receiver.spans if s.name == f"run {run_id}"]
        assert len(roots) == 1, (
            f"one root span per run; got {[s.name for s in receiver.spans][:30]}"
        )
        trace = [s for s in receiver.spans if s.trace_id == roots[0].trace_id]
        services = {s.service for s in trace}
        assert set(SERVICES) <= services, f"services in the run's trace: {services}"
        ids = {s.span_id for s in trace}
        orphans = [s for s in trace if s is not roots[0] and s.parent_id not in ids]
        assert not orphans, (
            f"spans whose parent is outside the trace: {[(o.service, o.name) for o in orphans]}"
        )
        llm = [s for s in trace if s.attributes.get("gen_ai.operation.name") == "chat"]
        assert llm and all(s.attributes.get("gen_ai.usage.input_tokens", 0) > 0 for s in llm)
        assert any(s.attributes.get("gen_ai.operation.name") == "execute_tool" for s in trace)
        assert {"assay.runs.in_flight", "assay.tokens", "assay.cost"} <= receiver.metric_names
