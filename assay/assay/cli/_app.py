"""The `assay` command: one typer app, commands registered by sibling modules."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

import typer
from rich.console import Console

from assay_schemas import AssayError

__all__ = ["app", "console", "run_async"]

T = TypeVar("T")

app = typer.Typer(
    name="assay",
    help="Evaluate AI research agents: sandboxed runs, sealed artifacts, an LLM jury, honest statistics.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
schemas_app = typer.Typer(help="Event and domain contracts.", no_args_is_help=True)
app.add_typer(schemas_app, name="schemas")

console = Console()
err_console = Console(stderr=True)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine; Assay errors become one clear line and exit code 2."""
    try:
        return asyncio.run(coro)
    except AssayError as e:
        err_console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug output.")) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
