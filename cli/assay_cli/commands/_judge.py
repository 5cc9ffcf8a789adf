"""`assay judge --spec JUDGE.yaml [--campaign ID]`: hot-add one judge, in the foreground.

The judge gets its own durable consumer with deliver-all, so it back-fills every sealed run
already on the log and then judges new ones, while every other service keeps running.
"""

from __future__ import annotations

from pathlib import Path

import typer

from assay.bus import Bus
from assay.config import Settings
from assay.service import run_until_signal
from assay.telemetry import traced
from assay_schemas import ConfigError

from ._app import app, console, fail, run_async

__all__ = ["judge"]


async def _run(settings: Settings, spec_path: Path, campaigns: list[str]) -> None:
    # Here, not at the top: assay_judge loads polars and the document readers (about 2 s),
    # which `assay --help` and the other commands need not wait for.
    from assay_judge import ALL_CAMPAIGNS, build, load_judge_spec

    spec = load_judge_spec(spec_path)
    scope = set(campaigns) if campaigns else ALL_CAMPAIGNS
    where = ", ".join(sorted(campaigns)) if campaigns else "every campaign"
    console.print(
        f"[green]judge {spec.judge_id}[/green] ({spec.provider} {spec.model}) on "
        f"{settings.nats_url}: back-filling and judging {where}   —   Ctrl-C to stop"
    )
    await run_until_signal([build(settings, spec, campaigns=scope)])


@app.command("judge")
def judge(
    spec: Path = typer.Option(..., "--spec", help="Judge spec file (YAML/TOML/JSON)."),
    campaign: list[str] = typer.Option(
        [], "--campaign", help="Judge only this campaign (repeatable); default: every campaign."
    ),
) -> None:
    """Start one judge against the configured NATS until Ctrl-C (settings from ASSAY_*)."""
    Bus.connect_timeout = None  # a service started before its NATS waits for it
    settings = Settings()
    try:
        with traced("assay-judge", instance=settings.instance):
            run_async(_run(settings, spec, campaign))
    except ConfigError as e:  # a bad OTEL_* exporter name: one line, not a traceback
        raise fail(e) from e
