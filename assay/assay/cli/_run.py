"""`assay run` (the main job) and `assay up --all`'s in-process services."""

from __future__ import annotations

from pathlib import Path

import typer

from assay_schemas import AssayError

from ._app import app, console, err_console


@app.command("run")
def run_command(
    tasks: Path = typer.Argument(
        Path("examples/tasks"), help="Task folder(s), .jsonl or ASI-Bench .json."
    ),
    campaign: Path = typer.Option(
        Path("examples/campaign.yaml"), "--campaign", "-c", help="Campaign file."
    ),
    html: Path = typer.Option(None, "--html", help="Where to write the HTML report."),
    timeout: float = typer.Option(1800.0, help="Give up after this many seconds."),
) -> None:
    """Run a campaign end to end on a fresh embedded stack and print the report."""
    from assay.run import run_campaign

    try:
        outcome = run_campaign(tasks, campaign, html=html, console=console, timeout_s=timeout)
    except AssayError as e:
        err_console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e
    if not outcome.progress.complete:
        raise typer.Exit(1)
