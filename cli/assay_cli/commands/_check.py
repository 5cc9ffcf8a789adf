"""`assay check`: the log's invariants, on any log (`assay_aggregator.invariants`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from ._app import app, console, run_async
from ._home import HOME_HELP, home_settings

__all__ = ["check_command"]


@app.command("check")
def check_command(
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
    as_json: bool = typer.Option(False, "--json", help="The result as JSON, for scripts."),
    grace: float = typer.Option(
        300.0,
        "--grace",
        min=0,
        help="Seconds past a run's wall clock that its campaign may go without moving "
        "while the run is in flight (and a sealed run wait for its verdicts) before it is "
        "a breach.",
    ),
    replay: bool = typer.Option(
        True, "--replay/--no-replay", help="Also compare the live report with a fresh replay."
    ),
) -> None:
    """The log's invariants: every requested run ends once (judged, or failed with stage and
    cause) or is in flight while its campaign moves; no live sandbox without a live run; every
    sealed run judged or failed by each enabled judge; the live report equals the replay.
    Exit 0: clean; 1: breaches, each named; 2: no log to read."""
    from assay_cli.check import check_stream, print_breaches

    with home_settings(home) as settings:
        result = run_async(check_stream(settings, replay=replay, grace_s=grace))
    if as_json:
        doc = {
            "clean": result.clean,
            "runs": result.runs,
            "log_sequence": result.log_sequence,
            "breaches": [b._asdict() for b in result.breaches],
        }
        sys.stdout.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    else:
        print_breaches(result.breaches, console)
        console.print(result.summary(), style=None if result.clean else "red", highlight=False)
    if not result.clean:
        raise typer.Exit(1)
