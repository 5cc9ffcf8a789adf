"""`assay judge --spec JUDGE.yaml [--campaign ID]`: hot-add one judge, in the foreground.

The same judge as `assay serve judge --judge JUDGE.yaml`: enabled for the named campaigns
(default: every campaign), it back-fills every sealed run of them it has not judged,
printing how far it got, then judges new runs, while every other service keeps running.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

import typer

from assay.bus import Bus
from assay.config import Settings
from assay.service import Service, run_until_signal
from assay.telemetry import traced
from assay_schemas import ConfigError

from ._app import app, console, fail, run_async

__all__ = ["CAMPAIGN_HELP", "judge", "print_backfill", "scope_text"]

CAMPAIGN_HELP = (
    "Enable the judge for this campaign (repeatable), besides those that name it; "
    "default: every campaign. Recorded on the log (JudgeRegistered), so a restart keeps it."
)


@runtime_checkable
class _Backfilling(Protocol):
    """A judge service: it tells a sink how far its back-fill got."""

    judge_id: str
    on_progress: Callable[[int, int, int], None] | None


def scope_text(campaigns: list[str]) -> str:
    """The campaigns a judge started alone is enabled for, in words."""
    named = ", ".join(sorted(campaigns)) if campaigns else "every campaign"
    return f"{named} (and those that name it)" if campaigns else named


def print_backfill(service: Service, *, every_s: float = 1.0) -> None:
    """Print a judge's back-fill progress (at most one line a second, and the last)."""
    if not isinstance(service, _Backfilling):
        return
    judge_id, last = service.judge_id, [0.0]

    def sink(done: int, total: int, already: int) -> None:
        now = time.monotonic()
        if done < total and done != already and now - last[0] < every_s:
            return
        last[0] = now
        tail = " — back-fill done" if done == total else ""
        console.print(
            f"judge {judge_id}: {done} of {total} runs judged ({already} already judged){tail}",
            highlight=False,
        )

    service.on_progress = sink


async def _run(settings: Settings, spec_path: Path, campaigns: list[str]) -> None:
    # Here, not at the top: assay_judge loads polars and the document readers (about 2 s),
    # which `assay --help` and the other commands need not wait for.
    from assay_judge import build, judge_scope, load_judge_spec

    spec, scope = load_judge_spec(spec_path), judge_scope(campaigns)
    console.print(
        f"[green]judge {spec.judge_id}[/green] ({spec.provider} {spec.model}) on "
        f"{settings.nats_url}: back-filling and judging {scope_text(campaigns)}"
        "   —   Ctrl-C to stop"
    )
    service = build(settings, spec, campaigns=scope)
    print_backfill(service)
    await run_until_signal([service])


@app.command("judge")
def judge(
    spec: Path = typer.Option(..., "--spec", help="Judge spec file (YAML/TOML/JSON)."),
    campaign: list[str] = typer.Option([], "--campaign", help=CAMPAIGN_HELP),
) -> None:
    """Start one judge against the configured NATS until Ctrl-C (settings from ASSAY_*);
    the same as `assay serve judge --judge SPEC`."""
    Bus.connect_timeout = None  # a service started before its NATS waits for it
    settings = Settings()
    try:
        with traced("assay-judge", instance=settings.instance):
            run_async(_run(settings, spec, campaign))
    except ConfigError as e:  # a bad OTEL_* exporter name: one line, not a traceback
        raise fail(e) from e
