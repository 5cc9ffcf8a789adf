"""OpenTelemetry setup and trace-context propagation through NATS headers."""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry import metrics, propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

__all__ = [
    "extract_context",
    "inject_headers",
    "meter",
    "setup_tracing",
    "shutdown_telemetry",
    "tracer",
]

_configured = False


def setup_tracing(service: str) -> None:
    """Install a tracer provider for `service`; export via OTLP when OTEL_* asks for it.

    The exporter follows the standard variables (OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_TRACES_EXPORTER), so production points it at a collector without code changes.
    """
    global _configured
    if _configured:
        return
    _configured = True
    resource = Resource.create({"service.name": service})
    provider = TracerProvider(resource=resource)
    if _wants_otlp("OTEL_TRACES_EXPORTER"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    if _wants_otlp("OTEL_METRICS_EXPORTER"):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))


def _wants_otlp(kind_variable: str) -> bool:
    kind = os.environ.get(kind_variable, "")
    return kind == "otlp" or (kind == "" and "OTEL_EXPORTER_OTLP_ENDPOINT" in os.environ)


def shutdown_telemetry() -> None:
    """Flush and stop exporters (spans and metrics still buffered are sent)."""
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        shutdown = getattr(provider, "shutdown", None)
        if shutdown is not None:
            shutdown()


def meter(name: str = "assay") -> metrics.Meter:
    """The meter for a component (no-op unless setup_tracing installed an exporter)."""
    return metrics.get_meter(name)


def tracer(name: str = "assay") -> trace.Tracer:
    """The tracer for a component."""
    return trace.get_tracer(name)


def inject_headers(headers: dict[str, str]) -> dict[str, str]:
    """Add the current trace context (W3C traceparent) to message headers."""
    propagate.inject(headers)
    return headers


def extract_context(headers: Mapping[str, str] | None) -> Context:
    """Trace context carried by a message, or an empty one."""
    return propagate.extract(dict(headers or {}))
