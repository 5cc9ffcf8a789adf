"""`assay serve NAME`: run one service in the foreground (scale out by starting more)."""

from __future__ import annotations

from pathlib import Path

import typer

from assay.bus import Bus
from assay.config import Settings
from assay.service import build_service, run_until_signal, service_names
from assay.telemetry import setup_tracing, shutdown_telemetry
from assay_schemas import ConfigError

from ._app import app, console, fail, run_async
from ._judge import CAMPAIGN_HELP, print_backfill


@app.command()
def serve(
    name: str = typer.Argument(
        ..., help="The service: runner, sandbox-manager, judge, rules, jury or aggregator."
    ),
    judge: Path = typer.Option(
        None, "--judge", help="Judge spec file (YAML/TOML/JSON), for `serve judge`."
    ),
    campaign: list[str] = typer.Option(
        [], "--campaign", help=f"For `serve judge`: {CAMPAIGN_HELP[0].lower()}{CAMPAIGN_HELP[1:]}"
    ),
) -> None:
    """Run one service until Ctrl-C; instances of a service share its work."""
    if name not in service_names():
        raise typer.BadParameter(
            f"unknown service {name!r}; installed: {', '.join(service_names())}"
        )
    Bus.connect_timeout = None  # a service started before its NATS waits for it
    settings = Settings()
    if judge is not None:
        settings = settings.model_copy(update={"judge_spec": judge})
    if campaign:
        settings = settings.model_copy(update={"judge_campaigns": campaign})
    try:
        setup_tracing(f"assay-{name}", instance=settings.instance)
        service = build_service(name, settings)  # a bad spec or --campaign: one line, exit 2
    except ConfigError as e:
        shutdown_telemetry()
        raise fail(e) from e
    console.print(
        f"[green]{name}[/green] serving on {settings.nats_url} (instance {settings.instance})"
    )
    try:
        print_backfill(service)
        run_async(run_until_signal([service]))
    finally:
        shutdown_telemetry()
