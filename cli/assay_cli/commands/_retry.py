"""`assay retry`: rerun infrastructure-failed runs as new attempts."""

from __future__ import annotations

from pathlib import Path

import typer

from assay.bus import Bus
from assay.config import Settings
from assay.retry import retry_failed, why_none_retried

from ._app import app, console, run_async
from ._home import HOME_HELP, home_settings


@app.command()
def retry(
    campaign: str = typer.Option("*", "--campaign", help="Only this campaign's runs."),
    run: str = typer.Option(None, "--run", help="Only this run."),
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
) -> None:
    """Rerun runs that ended in an infrastructure failure, each as a new attempt."""

    async def main(settings: Settings) -> None:
        async with Bus(settings, service="cli") as bus:
            retries = await retry_failed(bus, campaign=campaign, run=run)
            why = "" if retries else await why_none_retried(bus, campaign=campaign, run=run)
        for request in retries:
            console.print(
                f"{request.campaign_id} {request.task_id} {request.agent.agent_id} "
                f"epoch {request.epoch}: attempt {request.attempt} as run {request.run_id}",
                highlight=False,
            )
        console.print(f"{len(retries)} run(s) retried{f': {why}' if why else ''}", highlight=False)

    with home_settings(home) as settings:
        run_async(main(settings))
