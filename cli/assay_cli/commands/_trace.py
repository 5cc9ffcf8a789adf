"""`assay trace RUN`: where one run spent its time, drawn from the log (no collector)."""

from __future__ import annotations

import re
import sys
from contextlib import aclosing
from pathlib import Path

import typer

from assay.bus import Bus, read_raw
from assay.config import Settings
from assay.security.signing import trust_for
from assay_schemas import ID_PATTERN, Event

from ._app import app, console, err_console, run_async
from ._home import HOME_HELP, home_settings

__all__ = ["trace_command"]


async def _load(settings: Settings, run_id: str) -> tuple[list[Event], str | None]:
    """The run's counted events (the counting rule's decision, as `assay audit` takes it) and
    the trace id its RunRequested was published in."""
    from assay_aggregator.audit import REFUSED, load_run_events
    from assay_cli.waterfall import trace_id_of

    async with Bus(settings, service="cli") as bus:
        logged, signers = await load_run_events(bus, run_id, trust_for(settings))
        counted = {
            item.sequence: item.event
            for item in logged
            if not signers.get(item.sequence, "").startswith(REFUSED)
        }
        trace_id = None
        subject = bus.subjects.event("RunRequested", "*", run_id)
        # Closed on the break: a reader left open kept its consumer subscribed, and the
        # bus's stop waited for it (30 s) before the trace was drawn.
        async with aclosing(read_raw(bus.js, bus.stream.name, subject=subject)) as raws:
            async for raw in raws:
                if raw.sequence in counted:
                    trace_id = trace_id_of(raw.headers)
                    break
    return list(counted.values()), trace_id


@app.command("trace")
def trace_command(
    run_id: str = typer.Argument(..., help="The run to draw."),
    as_json: bool = typer.Option(False, "--json", help="The waterfall as JSON, for scripts."),
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
) -> None:
    """One run's trace as a waterfall: sandbox, each step's model and tool calls, the seal,
    each judgment, with durations and the trace id a collector shows; from the log alone."""
    from assay_cli.waterfall import build_waterfall, print_waterfall

    if not re.fullmatch(ID_PATTERN, run_id):
        raise typer.BadParameter(f"{run_id[:80]!r} is not a run id", param_hint="RUN_ID")
    with home_settings(home) as settings:
        events, trace_id = run_async(_load(settings, run_id))
    waterfall = build_waterfall(events, trace_id)
    if waterfall is None:
        err_console.print(f"[red]error:[/red] no RunRequested for run {run_id} in the log")
        raise typer.Exit(2)
    if as_json:
        sys.stdout.write(waterfall.model_dump_json(indent=2) + "\n")
        return
    print_waterfall(waterfall, console)
