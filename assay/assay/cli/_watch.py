"""`assay watch`: live progress of a campaign, read from the log."""

from __future__ import annotations

import asyncio
import contextlib

import typer
from rich.live import Live
from rich.table import Table

from assay.bus import Bus
from assay.config import Settings
from assay.progress import Progress

from ._app import app, console, run_async

__all__ = ["progress_table", "watch_log"]


def progress_table(p: Progress) -> Table:
    """One table: runs by state, steps, verdicts, failures, cost so far."""
    table = Table(
        title=f"campaign {p.campaign_id or '(all)'}" + ("  [scripted models]" if p.scripted else "")
    )
    table.add_column("what")
    table.add_column("progress", justify="right")
    table.add_column("", min_width=32)
    total = max(len(p.requested), 1)

    def bar(n: int, of: int) -> str:
        width = 30
        filled = int(width * n / of) if of else 0
        return "█" * filled + "·" * (width - filled)

    for state, n in p.state_counts().items():
        table.add_row(f"runs {state}", str(n), bar(n, total) if state != "requested" else "")
    table.add_row("agent steps", str(p.steps), "")
    table.add_row(
        "verdicts",
        f"{p.verdicts}/{p.expected_judgments}",
        bar(p.verdicts, p.expected_judgments or 1),
    )
    table.add_row("judge failures", str(len(p.judge_failures)), "")
    table.add_row("cost so far", f"${p.cost_usd:,.4f}", "")
    return table


async def watch_log(
    bus: Bus, progress: Progress, *, until_complete: bool, refresh_s: float = 0.25
) -> Progress:
    """Follow the log, redrawing progress; return when complete (if asked) or cancelled."""
    with Live(progress_table(progress), console=console, refresh_per_second=4) as live:
        async for logged in bus.replay(follow=True):
            progress.apply(logged.event)
            live.update(progress_table(progress))
            if until_complete and progress.complete:
                break
        await asyncio.sleep(0)
    return progress


@app.command()
def watch(
    campaign: str = typer.Argument(None, help="Campaign id (default: every campaign)."),
    exit_when_done: bool = typer.Option(
        False, "--exit", help="Return once the campaign is complete."
    ),
) -> None:
    """Live progress bars: runs by state, steps, judgments, failures, cost so far."""
    settings = Settings()

    async def main() -> None:
        async with Bus(settings, service="cli") as bus:
            await watch_log(bus, Progress(campaign_id=campaign), until_complete=exit_when_done)

    with contextlib.suppress(KeyboardInterrupt):
        run_async(main())
