"""`assay doctor`: this machine's prerequisites, each problem with its fix."""

from __future__ import annotations

import typer

from assay_cli.doctor import checks_for, print_checks, run_checks

from ._app import app, console


@app.command()
def doctor(
    backend: str = typer.Option(
        None, "--backend", help="Only what a campaign on this sandbox backend needs."
    ),
) -> None:
    """Check bubblewrap, user namespaces, the sandbox runtime, Docker, nats-server, ports,
    disk and cgroups; print each problem with its fix. Exits 1 when a needed one fails."""
    results = run_checks(checks_for("run" if backend else "all", backend or "bubblewrap"))
    print_checks(results, console)
    if any(not c.ok and not c.optional for c in results):
        raise typer.Exit(1)
    console.print("[green]all needed prerequisites hold[/green]")
