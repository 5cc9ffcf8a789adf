"""Tracer and meter providers for a process, one tracer provider per service in it.

Deployed, a process is one service. In the one-process stack (`assay run`, `assay up
--all`) every service shares the process, yet a collector should still see spans of
``assay-runner``, ``assay-sandbox-manager``, ``assay-judge-<id>``...: the bus marks what it
does on a service's behalf (`serving`), and `tracer` hands out tracers that start spans
on that service's provider. All providers feed the same span processors, so the
exporters are built once per process.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from contextvars import ContextVar, Token
from importlib.metadata import PackageNotFoundError, entry_points, version
from typing import Any

from opentelemetry import context as context_api
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from ._exporters import ExporterChoice, Signal, exporter_choices

__all__ = [
    "ServedSpan",
    "current_service",
    "meter",
    "serving",
    "setup_tracing",
    "shutdown_telemetry",
    "traced",
    "tracer",
]

_service: ContextVar[str | None] = ContextVar("assay_service", default=None)
_lock = threading.Lock()


class _Telemetry:
    """What `setup_tracing` installed in this process."""

    def __init__(self, service: str, instance: str) -> None:
        self.service = service
        self.instance = instance
        self.processors = SynchronousMultiSpanProcessor()  # type: ignore[no-untyped-call]
        self.providers: dict[str, TracerProvider] = {}
        self.tracers: dict[tuple[str, str], trace.Tracer] = {}
        self.meter_provider: Any = None

    def resource(self, service: str) -> Resource:
        return Resource.create(
            {
                "service.name": service,
                "service.namespace": "assay",
                "service.version": _version(),
                "service.instance.id": self.instance,
            }
        )

    def provider(self, service: str) -> TracerProvider:
        with _lock:
            found = self.providers.get(service)
            if found is None:
                found = TracerProvider(
                    resource=self.resource(service),
                    shutdown_on_exit=False,
                    active_span_processor=self.processors,
                )
                self.providers[service] = found
            return found

    def tracer(self, service: str, scope: str) -> trace.Tracer:
        """The tracer of instrumentation `scope` on `service`'s provider (made once)."""
        found = self.tracers.get((service, scope))
        if found is None:
            found = self.tracers[(service, scope)] = self.provider(service).get_tracer(scope)
        return found


_installed: _Telemetry | None = None


def _version() -> str:
    try:
        return version("assay")
    except PackageNotFoundError:  # a source checkout that was never installed
        return "0.0.0"


def _build(choice: ExporterChoice, signal: Signal) -> Any:
    group = f"opentelemetry_{signal}_exporter"
    found = entry_points(group=group, name=choice.entry_point)
    exporter = next(iter(found)).load()
    if choice.entry_point == "console":
        # Standard output carries the command's own output (progress, report, JSON for
        # scripts); spans and metrics printed there would interleave with it.
        return exporter(out=sys.stderr)
    return exporter()


def setup_tracing(service: str, *, instance: str | None = None) -> None:
    """Install tracing and metrics for a process running as `service` (e.g. ``assay-runner``,
    or ``assay`` for the one-process stack), exporting as the ``OTEL_*`` variables say
    (see `_exporters`). Raises ConfigError for an exporter name that is not installed,
    before anything is installed. A second call does nothing."""
    global _installed
    if _installed is not None:
        return
    span_choices = exporter_choices("traces")
    metric_choices = exporter_choices("metrics")
    host = instance or os.uname().nodename.split(".")[0] or "local"
    state = _Telemetry(service, f"{host}-{os.getpid()}")
    for choice in span_choices:
        exporter: SpanExporter = _build(choice, "traces")
        state.processors.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(state.provider(service))
    if metric_choices:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        readers = [PeriodicExportingMetricReader(_build(c, "metrics")) for c in metric_choices]
        state.meter_provider = MeterProvider(
            resource=state.resource(service), metric_readers=readers, shutdown_on_exit=False
        )
        metrics.set_meter_provider(state.meter_provider)
    _installed = state


def shutdown_telemetry() -> None:
    """Flush and stop the exporters (spans and metrics still buffered are sent)."""
    state = _installed
    if state is None:
        return
    state.processors.shutdown()
    if state.meter_provider is not None:
        state.meter_provider.shutdown()


@contextlib.contextmanager
def traced(service: str, *, instance: str | None = None) -> Iterator[None]:
    """`setup_tracing` for the block, and the exporters flushed when it ends."""
    setup_tracing(service, instance=instance)
    try:
        yield
    finally:
        shutdown_telemetry()


@contextlib.contextmanager
def serving(service: str) -> Iterator[None]:
    """Spans started inside (and in tasks created inside) belong to ``assay-<service>``;
    an empty name changes nothing."""
    if not service:
        yield
        return
    token = _service.set(service)
    try:
        yield
    finally:
        _service.reset(token)


def current_service() -> str | None:
    """The service the current work is done for (`serving`), if any."""
    return _service.get()


class _RoutingTracer(trace.Tracer):
    """A tracer that starts each span on the provider of the service doing the work."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._global: trace.Tracer | None = None

    def _target(self) -> trace.Tracer:
        state, service = _installed, _service.get()
        if state is None:
            # Made once: OpenTelemetry's own lookup cost more than a bus delivery's span.
            # Its tracer follows a provider set later (a proxy until then).
            if self._global is None:
                self._global = trace.get_tracer(self._name)
            return self._global
        name = state.service if service is None else f"assay-{service}"
        return state.tracer(name, self._name)

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return self._target().start_span(*args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        return self._target().start_as_current_span(*args, **kwargs)


class ServedSpan:
    """`serving(service)` and a span of `tracer` started as current inside it, in one
    context manager without generators: the bus opens one per message it handles, and
    `serving` plus `start_as_current_span` cost about as much as the rest of a delivery.
    An exception leaving the block is recorded on the span, as `start_as_current_span` does."""

    __slots__ = ("_context", "_name", "_service", "_span", "_token", "_tracer", "_using")

    def __init__(
        self, service: str, tracer: trace.Tracer, name: str, context: Context | None
    ) -> None:
        self._service, self._tracer, self._name, self._context = service, tracer, name, context
        self._token: Token[str | None] | None = None
        self._using: object = None
        self._span: trace.Span = trace.INVALID_SPAN

    def __enter__(self) -> trace.Span:
        if self._service:
            self._token = _service.set(self._service)
        self._span = span = self._tracer.start_span(self._name, context=self._context)
        self._using = context_api.attach(trace.set_span_in_context(span))
        return span

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        span = self._span
        if isinstance(error, Exception) and span.is_recording():
            span.record_exception(error)
            status = trace.Status(trace.StatusCode.ERROR, f"{type(error).__name__}: {error}")
            span.set_status(status)
        span.end()
        context_api.detach(self._using)  # type: ignore[arg-type]
        if self._token is not None:
            _service.reset(self._token)


def tracer(name: str = "assay") -> trace.Tracer:
    """The tracer for a component; its spans go to the service the work is done for."""
    return _RoutingTracer(name)


def meter(name: str = "assay") -> metrics.Meter:
    """The meter for a component (no-op unless `setup_tracing` installed an exporter)."""
    return metrics.get_meter(name)
