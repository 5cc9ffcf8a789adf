"""OpenTelemetry for Assay: exporters from the standard ``OTEL_*`` variables, one tracer
provider per service, and trace context carried in NATS headers."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import propagate
from opentelemetry.context import Context

from ._exporters import ExporterChoice, exporter_choices
from ._setup import (
    ServedSpan,
    current_service,
    meter,
    serving,
    setup_tracing,
    shutdown_telemetry,
    traced,
    tracer,
)

__all__ = [
    "ExporterChoice",
    "ServedSpan",
    "current_service",
    "exporter_choices",
    "extract_context",
    "inject_headers",
    "meter",
    "serving",
    "setup_tracing",
    "shutdown_telemetry",
    "traced",
    "tracer",
]


def inject_headers(headers: dict[str, str]) -> dict[str, str]:
    """Add the current trace context (W3C traceparent) to message headers."""
    propagate.inject(headers)
    return headers


def extract_context(headers: Mapping[str, str] | None) -> Context:
    """Trace context carried by a message, or an empty one."""
    return propagate.extract(dict(headers or {}))
