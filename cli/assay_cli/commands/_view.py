"""`assay view`: the web viewer over a stack's log, or over a finished run directory."""

from __future__ import annotations

import importlib.util
import ipaddress
from pathlib import Path

import typer

from assay.config import Settings
from assay_schemas import AssayError

from ._app import app, console, err_console, fail
from ._home import home_settings


def _is_address(host: str) -> bool:
    """A literal address needs no entry in the viewer's names: the address a connection
    arrives at is always answered; a host name given to bind is a name it is reached by."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


@app.command()
def view(
    run_dir: Path = typer.Argument(
        None, help="A finished run directory (default: the running stack)."
    ),
    campaign: str = typer.Option(None, "--campaign", help="Open on this campaign's page."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback unless told)."),
    port: int = typer.Option(8765, "--port", min=0, max=65535),
    resamples: int = typer.Option(10_000, "--resamples", min=1, help="Bootstrap resamples."),
    review: bool = typer.Option(
        False,
        "--review",
        help="Serve only the blind review queue of --reviewer: grades "
        "are published as verdicts signed with the reviewer's enrolled key (to a run "
        "directory's own log when one is given).",
    ),
    reviewer: str = typer.Option(
        None, "--reviewer", help="The reviewer grading (`assay keys enroll reviewer-NAME`)."
    ),
    allow_host: list[str] = typer.Option(
        [],
        "--allow-host",
        help="Answer to this host name too (besides loopback addresses, "
        "localhost and the address reached); any other Host is refused (DNS rebinding).",
    ),
) -> None:
    """Runs, transcripts, sealed files and verdicts in the browser, updated live."""
    if importlib.util.find_spec("uvicorn") is None:
        err_console.print("[red]error:[/red] assay view needs an ASGI server: pip install uvicorn")
        raise typer.Exit(2)
    import uvicorn

    # Here, not at the top: assay_report loads polars and scipy (about 2 s), which
    # `assay --help` and the other commands need not wait for.
    from assay_viewer import Source, create_app
    from assay_viewer.review import ReviewDesk

    from ._review import check_reviewer

    if review != (reviewer is not None):
        raise typer.BadParameter("--review and --reviewer NAME go together", param_hint="--review")
    if reviewer is not None:
        check_reviewer(reviewer)

    if host not in ("127.0.0.1", "localhost", "::1"):
        err_console.print(
            f"[yellow]serving on {host}: anyone who reaches it reads every run[/yellow]"
        )
    with home_settings(run_dir, writable=review) as settings:
        _check_reachable(settings)
        desk = None
        if reviewer is not None:
            try:
                desk = ReviewDesk(settings, reviewer)
            except AssayError as e:
                raise fail(e) from e
        page = f"/campaign/{campaign}" if campaign else "/"
        if desk is not None:
            page = f"/review/{campaign}" if campaign else "/review"
        console.print(f"assay view on http://{host}:{port}{page} (Ctrl-C to stop)")
        source = Source(settings, resamples=resamples)
        names = [*allow_host, *([] if _is_address(host) else [host])]
        # Live pages hold event streams open: on Ctrl-C, close them after a moment rather
        # than wait for every browser tab to go away.
        uvicorn.run(
            create_app(source, hosts=names, review=desk),
            host=host,
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=2,
        )


def _check_reachable(settings: Settings) -> None:
    """Say now, in one line, when the log cannot be reached, not on every page load."""
    from assay.bus import Bus

    from ._app import run_async

    async def connect() -> None:
        bus = Bus(settings, service="cli")
        await bus.connect()
        await bus.stop()

    run_async(connect())
