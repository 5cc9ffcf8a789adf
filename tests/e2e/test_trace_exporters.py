"""The standard exporters on the one-process stack (`assay run`), and `assay trace`.

Each campaign here is one task, one agent, one LLM judge (plus the rule judge), run by the
real CLI in a child process; spans are read from what the SDK's console exporter printed
or what a real OTLP/gRPC server received."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from assay.config import Settings

from .otlp_receiver import OtlpGrpcReceiver, OtlpReceiver, Span, console_spans, traced_python
from .test_run_outcome import CAMPAIGN, ROOT, assay, assay_run, logged_events, one_task

JUDGES = [j["judge_id"] for j in CAMPAIGN["judges"]] + ["rules"]  # type: ignore[index]
EXPECTED = {"assay-runner", "assay-sandbox-manager", "assay-aggregator"} | {
    f"assay-judge-{j}" for j in JUDGES
}
QUIET = {"OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_METRIC_EXPORT_INTERVAL": "500"}


def run_trace(spans: list[Span]) -> tuple[Span, list[Span]]:
    """The one run's root span and every span of its trace, checked to be one tree."""
    roots = [s for s in spans if s.name.startswith("run ")]
    assert len(roots) == 1, f"one root per run; got {sorted({s.name for s in spans})[:40]}"
    trace = [s for s in spans if s.trace_id == roots[0].trace_id]
    services = {s.service for s in trace}
    assert services >= EXPECTED, f"missing from the run's trace: {EXPECTED - services}"
    ids = {s.span_id for s in trace}
    orphans = [(s.service, s.name) for s in trace if s is not roots[0] and s.parent_id not in ids]
    assert not orphans, f"spans whose parent is outside the trace: {orphans}"
    chats = [s for s in trace if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert {s.service for s in chats} >= {"assay-runner", "assay-judge-judge-strict"}
    for span in chats:
        assert span.attributes["gen_ai.usage.input_tokens"] > 0
        assert span.attributes["gen_ai.response.model"] == span.attributes["gen_ai.request.model"]
        assert span.attributes["gen_ai.response.finish_reasons"]
    assert any(s.attributes.get("gen_ai.operation.name") == "execute_tool" for s in trace)
    return roots[0], trace


def trace_json(run_dir: Path, run_id: str) -> dict:  # type: ignore[type-arg]
    out = assay("trace", run_id, "--home", str(run_dir), "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def log_wall_ms(run_dir: Path, run_id: str) -> float:
    """From the run's RunRequested to its last event, read with `assay events` (not with
    the code under test)."""
    mine = logged_events(run_dir)
    times = [datetime.fromisoformat(e["occurred_at"]) for e in mine if e.get("run_id") == run_id]
    requested = next(
        datetime.fromisoformat(e["occurred_at"])
        for e in mine
        if e["event_type"] == "RunRequested" and e["run_id"] == run_id
    )
    return (max(times) - requested).total_seconds() * 1000


@pytest.mark.slow
def test_console_exporter_prints_one_trace_per_run_and_assay_trace_draws_it(
    settings: Settings, tmp_path: Path
) -> None:
    tasks, campaign = one_task(tmp_path)
    out = assay_run(settings, tasks, campaign, OTEL_TRACES_EXPORTER="console", **QUIET)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    root, trace = run_trace(console_spans(out.stderr))
    run_id = root.name.removeprefix("run ")
    [run_dir] = list((settings.home / "runs").glob("small-*"))

    drawn = trace_json(run_dir, run_id)
    assert drawn["trace_id"] == root.trace_id, "the id a collector shows"
    top = [r for r in drawn["rows"] if r["depth"] == 0]
    covered = sum(r["duration_ms"] for r in top)
    wall = drawn["wall_ms"]
    assert abs(covered - wall) <= 0.05 * wall
    # The wall time itself, measured two other ways: the log read by `assay events`, and
    # the extent of the exported spans of the run's trace.
    assert abs(wall - log_wall_ms(run_dir, run_id)) <= 0.05 * wall
    # The exported spans cover the run; they may end after its last logged event by the
    # work that follows it (the sandbox's teardown after its seal, the aggregator folding
    # the last verdict), which a loaded machine stretches: 0.7 s once in CI.
    extent = (max(s.end_ns for s in trace) - min(s.start_ns for s in trace)) / 1e6
    assert extent >= 0.95 * wall, (wall, extent)
    assert extent - wall <= max(0.05 * wall, 3000.0), (wall, extent)
    kinds = {r["kind"] for r in drawn["rows"]}
    assert {"sandbox", "step", "model", "tool", "seal", "judging", "judgment"} <= kinds
    judged = {r["name"] for r in drawn["rows"] if r["kind"] == "judgment"}
    assert judged == {f"judgment {j}" for j in JUDGES}
    # Every step's model and tool calls lie inside their step.
    steps = [r for r in top if r["kind"] == "step"]
    assert steps
    for parent in steps:
        inside = [
            r
            for r in drawn["rows"]
            if r["depth"] == 1
            and parent["start_ms"] <= r["start_ms"] < parent["start_ms"] + parent["duration_ms"] + 1
        ]
        assert any(r["kind"] == "model" for r in inside)

    text = subprocess.run(
        [sys.executable, "-m", "assay_cli", "trace", run_id, "--home", str(run_dir)],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert text.returncode == 0, text.stderr
    assert f"trace id {root.trace_id}" in text.stdout
    for label in ("sandbox create", "model call", "tool bash", "seal artifacts", "judgment rules"):
        assert label in text.stdout


@pytest.mark.slow
def test_otlp_grpc_and_console_together_from_one_comma_list(
    settings: Settings, tmp_path: Path
) -> None:
    tasks, campaign = one_task(tmp_path)
    with OtlpGrpcReceiver() as receiver:
        out = assay_run(
            settings,
            tasks,
            campaign,
            OTEL_TRACES_EXPORTER="console,otlp",
            OTEL_METRICS_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            # The per-signal variables win over the general one (as the SDK documents).
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="grpc",
            OTEL_EXPORTER_OTLP_METRICS_PROTOCOL="grpc",
            **QUIET,
        )
        assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    received, _ = run_trace(receiver.spans)
    printed, _ = run_trace(console_spans(out.stderr))
    assert received.trace_id == printed.trace_id, "both exporters saw the same trace"
    assert {"assay.tokens", "assay.runs.in_flight"} <= receiver.metric_names
    resource_ok = [s for s in receiver.spans if s.service.startswith("assay-")]
    assert resource_ok, "spans carry service.name"


NONE_SCRIPT = textwrap.dedent(
    """
    from assay.telemetry import setup_tracing, shutdown_telemetry, tracer
    setup_tracing("assay-test")
    with tracer("t").start_as_current_span("visible"):
        pass
    shutdown_telemetry()
    """
)


def test_none_exports_nothing_though_an_endpoint_is_set() -> None:
    with OtlpReceiver() as receiver:
        base = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        results = {}
        for value in ("none", "console", ""):
            out = traced_python(NONE_SCRIPT, value, env=base, cwd=ROOT)
            assert out.returncode == 0, out.stderr
            results[value] = (console_spans(out.stderr), len(receiver.spans))
    assert results["none"] == ([], 0), "none: not printed, not sent"
    assert [s.name for s in results["console"][0]] == ["visible"]
    assert results["console"][1] == 0, "console alone sends nothing"
    assert results[""][1] == 1, "unset with an endpoint: OTLP"
    [sent] = receiver.spans
    assert sent.service == "assay-test" and sent.name == "visible"


@pytest.mark.parametrize(
    "command", [["run", "--skip-checks"], ["serve", "runner"], ["judge", "--spec", "x.yaml"]]
)
def test_a_bad_exporter_name_is_one_clear_line(
    settings: Settings, tmp_path: Path, command: list[str]
) -> None:
    env = {
        **os.environ,
        "ASSAY_HOME": str(settings.home),
        "ASSAY_NATS_URL": settings.nats_url,
        "OTEL_TRACES_EXPORTER": "console,jaegr",
    }
    out = subprocess.run(
        [sys.executable, "-m", "assay_cli", *command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    said = " ".join(out.stderr.split())  # as the terminal wrapped it
    assert "OTEL_TRACES_EXPORTER: no exporter 'jaegr' is installed (available: console" in said
