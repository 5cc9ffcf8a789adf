"""`assay serve NAME`: run one service in the foreground (scale out by starting more)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import signal
from pathlib import Path

import typer

from assay.config import Settings
from assay.telemetry import setup_tracing, shutdown_telemetry

from ._app import app, console, run_async

SERVICES = {
    "runner": "assay.runner.app",
    "sandbox-manager": "assay.sandbox_manager.app",
    "judge": "assay.judge.app",
    "rules": "assay.judge.app",
    "aggregator": "assay.aggregator.app",
}


async def _until_signal(coro_factory: object) -> None:
    """Run a service coroutine until SIGINT/SIGTERM, then let it stop cleanly."""
    task = asyncio.create_task(coro_factory())  # type: ignore[operator]
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task


@app.command()
def serve(
    name: str = typer.Argument(..., help=f"One of: {', '.join(SERVICES)}."),
    judge: Path = typer.Option(
        None, "--judge", help="Judge spec file (YAML/JSON), for `serve judge`."
    ),
) -> None:
    """Run one service until Ctrl-C; instances of a service share its work."""
    if name not in SERVICES:
        raise typer.BadParameter(f"unknown service {name!r}; choose one of {', '.join(SERVICES)}")
    settings = Settings()
    setup_tracing(f"assay-{name}")
    module = importlib.import_module(SERVICES[name])
    console.print(
        f"[green]{name}[/green] serving on {settings.nats_url} (instance {settings.instance})"
    )
    try:
        if name == "judge":
            if judge is None:
                raise typer.BadParameter("`assay serve judge` needs --judge SPEC")
            from assay.judge.spec import load_judge_spec

            spec = load_judge_spec(judge)
            run_async(_until_signal(lambda: module.serve(settings, spec)))
        elif name == "rules":
            run_async(_until_signal(lambda: module.serve_rules(settings)))
        else:
            run_async(_until_signal(lambda: module.serve(settings)))
    finally:
        shutdown_telemetry()
