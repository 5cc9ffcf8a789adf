"""`assay check`: the log's invariants, on any log (`assay_aggregator.invariants`)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from assay.bus import Bus, RawMessage
from assay.config import Settings
from assay.security.signing import trust_for
from assay.store import open_store
from assay_schemas import InvalidEvent, parse_event

from ._app import app, console, run_async
from ._home import HOME_HELP, home_settings

if TYPE_CHECKING:
    from assay_aggregator.invariants import Breach, LogCheck
    from assay_aggregator.state import State

__all__ = ["check_command"]


async def _check(settings: Settings, replay: bool) -> tuple[LogCheck, list[Breach]]:
    """Fold the whole log as the aggregator does, observing every stored event; then the
    live report against a fresh replay (`assay replay --verify`'s comparisons)."""
    from assay_aggregator.invariants import Breach, LogCheck
    from assay_aggregator.rebuild import fold_stream
    from assay_aggregator.verify import verify

    check = LogCheck()

    def observe(state: State, batch: list[RawMessage]) -> None:
        for raw in batch:
            try:
                event = parse_event(raw.data, subject=raw.subject)
            except InvalidEvent:
                continue  # refused by the fold already; no run to check
            check.observe(raw.sequence, event)

    async with Bus(settings, service="cli") as bus:
        await fold_stream(
            bus.js, bus.stream.name, bus.subjects.events, state=check.state,
            trust=trust_for(settings), load=open_store(settings).get_bytes, observe=observe,
        )  # fmt: skip
    differs: list[Breach] = []
    if replay:
        for c in await verify(settings):
            if not c.identical:
                differs.append(Breach("replay_differs", "", f"{c.name}: the live aggregator "
                                      f"and a fresh replay differ\n{c.diff}"))  # fmt: skip
    return check, differs


@app.command("check")
def check_command(
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
    as_json: bool = typer.Option(False, "--json", help="The result as JSON, for scripts."),
    grace: float = typer.Option(
        300.0,
        "--grace",
        min=0,
        help="Seconds a run may stay in flight past its wall clock "
        "(and a sealed run wait for its verdicts) before it is a breach.",
    ),
    replay: bool = typer.Option(
        True, "--replay/--no-replay", help="Also compare the live report with a fresh replay."
    ),
) -> None:
    """The log's invariants: every requested run ends once (judged, or failed with stage and
    cause) or is in flight within its limits; no live sandbox without a live run; every
    sealed run judged or failed by each enabled judge; the live report equals the replay.
    Exit 0: clean; 1: breaches, each named; 2: no log to read."""
    with home_settings(home) as settings:
        check, differs = run_async(_check(settings, replay))
    breaches = [*check.breaches(datetime.now(UTC), grace), *differs]
    runs = len(check.state.runs)
    if as_json:
        doc = {
            "clean": not breaches,
            "runs": runs,
            "log_sequence": check.state.last_sequence,
            "breaches": [b._asdict() for b in breaches],
        }
        sys.stdout.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    else:
        for b in breaches:
            console.print(f"[red]{b.kind}[/red] {b.detail}", highlight=False, soft_wrap=True)
        if breaches:
            console.print(f"[red]{len(breaches)} breach(es)[/red] in {runs} runs "
                          f"(log up to seq {check.state.last_sequence})")  # fmt: skip
        else:
            console.print(f"clean: {runs} runs, log up to seq {check.state.last_sequence}")
    if breaches:
        raise typer.Exit(1)
