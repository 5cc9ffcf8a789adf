"""`assay watch`: live progress of a campaign, read from the log."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from assay.bus import Bus
from assay.config import Settings
from assay.security.controls import controls_key
from assay_cli.problems import problems_of
from assay_cli.progress import Progress, advance

from ._app import app, console, err_console, run_async
from ._home import HOME_HELP, home_settings

__all__ = ["live_table", "log_head", "print_pending", "progress_table", "watch_log"]


def progress_table(p: Progress) -> Table:
    """One table: runs by state, steps, verdicts, failures, cost so far."""
    table = Table(
        title=f"campaign {p.campaign_id or '(all)'}" + ("  [scripted models]" if p.scripted else "")
    )
    table.add_column("what")
    table.add_column("progress", justify="right")
    table.add_column("", min_width=32)
    total = max(len(p.expected), 1)

    def bar(n: int, of: int) -> str:
        width = 30
        filled = int(width * n / of) if of else 0
        return "█" * filled + "·" * (width - filled)

    for state, n in p.state_counts().items():
        shown = state not in ("expected", "requested")
        table.add_row(f"runs {state}", str(n), bar(n, total) if shown else "")
    table.add_row("agent steps", str(p.steps), "")
    table.add_row(
        "verdicts",
        f"{p.verdicts}/{p.expected_judgments}",
        bar(p.verdicts, p.expected_judgments or 1),
    )
    table.add_row("judge failures", str(len(p.judgment_failures)), "")
    table.add_row("cost so far", f"${p.cost_usd:,.4f}", "")
    return table


@contextlib.contextmanager
def live_table(table: Table, out: Console) -> Iterator[Live]:
    """A table redrawn in place on a terminal; piped, its last drawing ends its line, so
    what is printed next (the report) starts on a line of its own."""
    with Live(table, console=out, refresh_per_second=4) as live:
        yield live
    if not out.is_terminal:
        out.line()  # rich leaves a non-terminal's last line open


async def watch_log(
    bus: Bus,
    progress: Progress,
    *,
    until_complete: bool,
    settle_at: int = 0,
    refresh_s: float = 0.25,
) -> Progress:
    """Follow the log, redrawing progress; return when complete (if asked) or cancelled.

    `settle_at`: a log sequence to read up to before judging completeness, so that tasks
    already submitted count as expected even before their runs are requested.
    """
    drawn = 0.0
    key = controls_key(bus.settings)
    with live_table(progress_table(progress), console) as live:
        async for logged in bus.replay(follow=True):
            advance(progress, logged.event, key)
            if time.monotonic() - drawn >= refresh_s:
                live.update(progress_table(progress))
                drawn = time.monotonic()
            if until_complete and logged.sequence >= settle_at and progress.complete:
                break
        live.update(progress_table(progress))
        await asyncio.sleep(0)
    return progress


async def log_head(bus: Bus) -> int:
    """The last sequence on the log now."""
    return int((await bus.js.stream_info(bus.settings.stream)).state.last_seq)


def print_pending(progress: Progress, timeout_s: float | None = None) -> None:
    """Name what the log still owes (after a timeout of `timeout_s` seconds)."""
    after = f" after {timeout_s:g} s" if timeout_s is not None else ""
    err_console.print(f"[red]timed out[/red]{after} with work pending:")
    for line in problems_of(progress).lines() or ["no task submitted yet"]:
        err_console.print(f"  • {line}")


@app.command()
def watch(
    campaign: str = typer.Argument(None, help="Campaign id (default: every campaign)."),
    exit_when_done: bool = typer.Option(
        False, "--exit", help="Return once the campaign is complete (non-zero on timeout)."
    ),
    timeout: float = typer.Option(None, help="With --exit: give up after this many seconds."),
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
) -> None:
    """Live progress bars: runs by state, steps, judgments, failures, cost so far."""
    progress = Progress(campaign_id=campaign)

    async def main(settings: Settings) -> None:
        async with Bus(settings, service="cli") as bus:
            head = await log_head(bus)
            await asyncio.wait_for(
                watch_log(bus, progress, until_complete=exit_when_done, settle_at=head), timeout
            )

    try:
        with home_settings(home) as settings:
            run_async(main(settings))
    except KeyboardInterrupt:
        return
    except TimeoutError:
        print_pending(progress, timeout)
        raise typer.Exit(1) from None
