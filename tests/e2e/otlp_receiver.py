"""Tiny OTLP receivers on loopback (HTTP and gRPC) and a reader of the console exporter's
output: each collects exported spans (and metric names) for assertions."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class Span(NamedTuple):
    """The fields of an exported span that the tests look at."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    start_ns: int = 0
    end_ns: int = 0


class OtlpReceiver:
    """Accepts POST /v1/traces and /v1/metrics (protobuf), keeps what arrives."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.metric_names: set[str] = set()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":
                    receiver._traces(body)
                elif self.path == "/v1/metrics":
                    receiver._metrics(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """Base URL for OTEL_EXPORTER_OTLP_ENDPOINT."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _traces(self, body: bytes) -> None:
        with self._lock:
            self.spans += spans_of(ExportTraceServiceRequest.FromString(body))

    def _metrics(self, body: bytes) -> None:
        with self._lock:
            self.metric_names |= metric_names_of(ExportMetricsServiceRequest.FromString(body))

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    """The spans of one OTLP export request."""
    found: list[Span] = []
    for rs in request.resource_spans:
        attrs = {a.key: a.value.string_value for a in rs.resource.attributes}
        service = attrs.get("service.name", "")
        for ss in rs.scope_spans:
            for s in ss.spans:
                found.append(
                    Span(
                        service,
                        s.name,
                        s.trace_id.hex(),
                        s.span_id.hex(),
                        s.parent_span_id.hex(),
                        {a.key: _value(a.value) for a in s.attributes},
                        s.start_time_unix_nano,
                        s.end_time_unix_nano,
                    )
                )
    return found


def metric_names_of(request: ExportMetricsServiceRequest) -> set[str]:
    """The names of the metrics in one OTLP export request."""
    return {
        m.name for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }


class OtlpGrpcReceiver(
    trace_service_pb2_grpc.TraceServiceServicer, metrics_service_pb2_grpc.MetricsServiceServicer
):
    """An OTLP/gRPC collector on loopback: the TraceService and MetricsService of
    opentelemetry-proto, served by grpcio; keeps what arrives."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.metric_names: set[str] = set()
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        """URL for OTEL_EXPORTER_OTLP_ENDPOINT (http: a plaintext channel)."""
        return f"http://127.0.0.1:{self.port}"

    def Export(self, request: Any, context: Any) -> Any:
        with self._lock:
            if isinstance(request, ExportTraceServiceRequest):
                self.spans += spans_of(request)
                return ExportTraceServiceResponse()
            self.metric_names |= metric_names_of(request)
            return ExportMetricsServiceResponse()

    def __enter__(self) -> OtlpGrpcReceiver:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop(grace=None)


def traced_python(
    script: str,
    traces: str = "console",
    metrics: str = "none",
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `script` in a fresh interpreter with these OTEL exporters (over `env`, by default
    this process's environment); what it printed comes back."""
    exporters = {"OTEL_TRACES_EXPORTER": traces, "OTEL_METRICS_EXPORTER": metrics}
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env={**(os.environ if env is None else env), **exporters},
        capture_output=True,
        text=True,
        timeout=60,
    )


def console_spans(text: str) -> list[Span]:
    """Spans printed by the SDK's ConsoleSpanExporter (one JSON object each), found among
    whatever else the process printed."""
    decoder = json.JSONDecoder()
    found: list[Span] = []
    at = text.find('{\n    "name"')
    while at != -1:
        obj, end = decoder.raw_decode(text, at)
        context = obj["context"]
        found.append(
            Span(
                obj["resource"]["attributes"].get("service.name", ""),
                obj["name"],
                context["trace_id"].removeprefix("0x"),
                context["span_id"].removeprefix("0x"),
                (obj["parent_id"] or "").removeprefix("0x"),
                obj["attributes"],
                _iso_ns(obj["start_time"]),
                _iso_ns(obj["end_time"]),
            )
        )
        at = text.find('{\n    "name"', end)
    return found


def _iso_ns(stamp: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1e9)
