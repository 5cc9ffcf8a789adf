"""OpenTelemetry setup and trace-context propagation through NATS headers."""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

__all__ = ["extract_context", "inject_headers", "setup_tracing", "tracer"]

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
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter_kind = os.environ.get("OTEL_TRACES_EXPORTER", "")
    wants_otlp = exporter_kind == "otlp" or (
        exporter_kind == "" and "OTEL_EXPORTER_OTLP_ENDPOINT" in os.environ
    )
    if wants_otlp:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)


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
