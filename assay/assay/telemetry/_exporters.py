"""Exporters chosen by the OpenTelemetry environment variables, as the SDK documents them.

``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` hold a comma-separated list of names
(``console``, ``otlp``, ``none``, or any installed exporter's name). Each name is resolved
through the SDK's entry-point groups (``opentelemetry_traces_exporter``,
``opentelemetry_metrics_exporter``), so an installed exporter package is usable by its name
without a line here. ``otlp`` is the OTLP exporter for ``OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL``
or ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``http/protobuf``, the specification's default, or
``grpc``). Endpoints, headers, timeouts and compression are read by the exporters themselves
from the standard variables.

One difference from the SDK's defaults, on purpose: with neither variable set, nothing is
exported unless an OTLP endpoint is configured, so a laptop without a collector is not
filled with connection errors.
"""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from typing import Literal, NamedTuple

from assay_schemas import ConfigError

__all__ = ["ExporterChoice", "Signal", "exporter_choices"]

Signal = Literal["traces", "metrics"]

_GROUPS: dict[Signal, str] = {
    "traces": "opentelemetry_traces_exporter",
    "metrics": "opentelemetry_metrics_exporter",
}
_PROTOCOLS = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}
_MAX_NAMES = 8
"""More exporters than this for one signal is a mistake, not a configuration."""


class ExporterChoice(NamedTuple):
    """One exporter to build: the name the user wrote and the entry point it resolves to."""

    name: str
    entry_point: str
    target: str
    """``module:attribute`` of the exporter class."""


def _variable(signal: Signal) -> str:
    return f"OTEL_{signal.upper()}_EXPORTER"


def _names(signal: Signal) -> list[str]:
    variable = _variable(signal)
    raw = os.environ.get(variable, "").strip()
    if not raw:
        endpoint = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT") or (
            os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        )
        return ["otlp"] if endpoint else []
    names = [n.strip().lower() for n in raw.split(",")]
    if len(names) > _MAX_NAMES:
        raise ConfigError(f"{variable}: more than {_MAX_NAMES} exporters listed")
    if any(not n for n in names):
        raise ConfigError(f"{variable}={raw[:100]!r}: an empty name in the list")
    if "none" in names:
        if len(names) > 1:
            raise ConfigError(f"{variable}={raw[:100]!r}: 'none' cannot be combined with others")
        return []
    return list(dict.fromkeys(names))  # a name given twice exports once


def _entry_point_name(name: str, signal: Signal) -> str:
    if name != "otlp":
        return name
    variable = f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL"
    protocol = os.environ.get(variable) or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    protocol = protocol.strip().lower() or "http/protobuf"
    if protocol not in _PROTOCOLS:
        raise ConfigError(
            f"{variable} / OTEL_EXPORTER_OTLP_PROTOCOL={protocol[:40]!r}: not a supported OTLP "
            f"protocol (supported: {', '.join(_PROTOCOLS)})"
        )
    return _PROTOCOLS[protocol]


def exporter_choices(signal: Signal) -> list[ExporterChoice]:
    """The exporters the environment asks for `signal`; ConfigError for a name no
    installed package provides, with the names that are available."""
    group = _GROUPS[signal]
    installed = {ep.name: ep.value for ep in entry_points(group=group)}
    choices: list[ExporterChoice] = []
    for name in _names(signal):
        ep_name = _entry_point_name(name, signal)
        if ep_name not in installed:
            known = sorted({*installed, "otlp", "none"})
            raise ConfigError(
                f"{_variable(signal)}: no exporter {name[:40]!r} is installed "
                f"(available: {', '.join(known)})"
            )
        choices.append(ExporterChoice(name, ep_name, installed[ep_name]))
    return choices
