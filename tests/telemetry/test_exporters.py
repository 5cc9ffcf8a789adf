"""Which exporters the OTEL_* variables select, resolved through the SDK's entry points."""

from __future__ import annotations

import pytest

from assay.telemetry import exporter_choices
from assay_schemas import ConfigError
from tests.e2e.otlp_receiver import traced_python

OTEL = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
)


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in OTEL:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def names(signal: str = "traces") -> list[str]:
    return [c.entry_point for c in exporter_choices(signal)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("env", "traces", "metrics"),
    [
        ({}, [], []),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
            ["otlp_proto_http"],
            ["otlp_proto_http"],
        ),
        (
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"},
            ["otlp_proto_http"],
            [],
        ),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"], []),
        ({"OTEL_TRACES_EXPORTER": " Console , otlp "}, ["console", "otlp_proto_http"], []),
        ({"OTEL_TRACES_EXPORTER": "console,console"}, ["console"], []),
        (
            {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"},
            [],
            ["otlp_proto_http"],
        ),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            ["otlp_proto_grpc"],
            [],
        ),
        (
            {
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_METRICS_EXPORTER": "otlp,console",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
            },
            ["otlp_proto_grpc"],
            ["otlp_proto_http", "console"],
        ),
        ({"OTEL_TRACES_EXPORTER": "otlp_proto_grpc"}, ["otlp_proto_grpc"], []),
    ],
)
def test_the_variables_choose_the_exporters(
    clean: pytest.MonkeyPatch, env: dict[str, str], traces: list[str], metrics: list[str]
) -> None:
    for name, value in env.items():
        clean.setenv(name, value)
    assert names("traces") == traces
    assert names("metrics") == metrics


def test_each_choice_loads_the_sdk_exporter_class(clean: pytest.MonkeyPatch) -> None:
    clean.setenv("OTEL_TRACES_EXPORTER", "console,otlp")
    clean.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    targets = [c.target for c in exporter_choices("traces")]
    assert targets == [
        "opentelemetry.sdk.trace.export:ConsoleSpanExporter",
        "opentelemetry.exporter.otlp.proto.grpc.trace_exporter:OTLPSpanExporter",
    ]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OTEL_TRACES_EXPORTER": "jaegr"}, "no exporter 'jaegr' is installed (available: console"),
        (
            {"OTEL_METRICS_EXPORTER": "prometheus"},
            "OTEL_METRICS_EXPORTER: no exporter 'prometheus'",
        ),
        ({"OTEL_TRACES_EXPORTER": "none,console"}, "'none' cannot be combined"),
        ({"OTEL_TRACES_EXPORTER": "console,,otlp"}, "an empty name in the list"),
        ({"OTEL_TRACES_EXPORTER": ",".join(["console"] * 9)}, "more than 8 exporters"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
            "'http/json': not a supported OTLP protocol (supported: http/protobuf, grpc)",
        ),
        ({"OTEL_TRACES_EXPORTER": "x" * 100_000}, "no exporter 'xxxx"),
    ],
)
def test_a_bad_value_is_a_clear_config_error(
    clean: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    for name, value in env.items():
        clean.setenv(name, value)
    signal = "metrics" if "OTEL_METRICS_EXPORTER" in env else "traces"
    with pytest.raises(ConfigError) as raised:
        exporter_choices(signal)  # type: ignore[arg-type]
    assert message in str(raised.value)
    assert len(str(raised.value)) < 400, "the value is not echoed whole"


_SPAN_AND_METRIC = """
from assay.telemetry import meter, traced, tracer
with traced("assay-probe"):
    with tracer().start_as_current_span("probe-span"):
        print("the command's own output")
    meter().create_counter("probe_counter").add(1)
"""


def test_console_exporters_write_to_standard_error_not_into_the_commands_output() -> None:
    """Issue #53 item 3: spans and metrics asked for on the console must not interleave
    with what the command prints (progress, report, JSON lines for scripts)."""
    done = traced_python(_SPAN_AND_METRIC, metrics="console")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "the command's own output\n"
    assert "probe-span" in done.stderr
    assert "probe_counter" in done.stderr
