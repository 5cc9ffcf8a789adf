"""The `assay` command: one typer app, commands registered by sibling modules."""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
import threading
import traceback
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from assay.embedded import PortInUse
from assay_cli.command import assay_command
from assay_schemas import AssayError, NatsUnreachable, NotAuthenticated

__all__ = [
    "CONNECT_TIMEOUT_S",
    "app",
    "as_command",
    "console",
    "fail",
    "run_async",
    "summarise_commands",
]

T = TypeVar("T")

CONNECT_TIMEOUT_S = 5.0
"""How long a command waits for NATS before it says why it cannot connect."""

app = typer.Typer(
    name="assay",
    help="Evaluate AI research agents: sandboxed runs, sealed artifacts, an LLM jury, honest statistics.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
schemas_app = typer.Typer(help="Event and domain contracts.", no_args_is_help=True)
app.add_typer(schemas_app, name="schemas")

STOPS = (signal.SIGINT, signal.SIGTERM)

console = Console()
err_console = Console(stderr=True)


def warn(warnings: Iterable[str]) -> None:
    """Each warning on stderr, in yellow, its text escaped (it may quote a task's)."""
    for warning in warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}", soft_wrap=True)


_verbose = False


def fail(error: BaseException, code: int = 2) -> typer.Exit:
    """Print `error` as one line (with its traceback under -v); the Exit to raise."""
    if _verbose:
        err_console.print("".join(traceback.format_exception(error)), markup=False, highlight=False)
    text = str(error) if isinstance(error, AssayError) else f"{type(error).__name__}: {error}"
    hint = "" if _verbose or isinstance(error, AssayError) else " (assay -v shows the traceback)"
    err_console.print(
        f"[red]error:[/red] {escape(text + remedy(error))}{hint}", highlight=False, soft_wrap=True
    )
    return typer.Exit(code)


def remedy(error: BaseException) -> str:
    """What to do about `error`, for the errors whose remedy is a command of this CLI (the
    parts below it say what went wrong, never which command to type)."""
    assay = assay_command()
    if isinstance(error, NotAuthenticated):
        return f", e.g. `set -a; . <home>/nats/cli.env` from `{assay} up --auth`"
    if isinstance(error, NatsUnreachable):
        return (
            f": start the stack (`{assay} up`), open a finished run directory instead "
            f"(--home RUN_DIR; `{assay} view RUN_DIR`), or set ASSAY_NATS_URL to the "
            "server's address"
        )
    if isinstance(error, PortInUse):
        return (
            f"; stop it or choose another port (`{assay} up --port N`, or the port in "
            "ASSAY_NATS_URL=nats://127.0.0.1:N)"
        )
    return ""


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, with a SIGINT or SIGTERM that lands while the loop is being built held
    until it is whole: raised inside its construction, it left a half-made loop whose
    finaliser printed a traceback at exit."""
    runner = asyncio.Runner()
    try:
        if threading.current_thread() is threading.main_thread():
            held: list[int] = []
            before = {s: signal.signal(s, lambda n, _: held.append(n)) for s in STOPS}
            try:
                runner.get_loop()
            finally:
                for s, handler in before.items():
                    signal.signal(s, handler)
            if held:
                raise KeyboardInterrupt
        return runner.run(coro)
    finally:
        runner.close()
        coro.close()  # never started when a signal came first: no "never awaited" warning


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine; Assay and NATS errors become one clear line and exit code 2."""
    from nats.errors import Error as NatsError

    try:
        return _run(coro)
    except AssayError as e:
        raise fail(e) from e
    except NatsError as e:
        # A request the user's permissions refuse is dropped by the server: the client
        # only sees a timeout, so name that cause first.
        from assay.config import Settings

        user = Settings().nats_user
        who = f"NATS user {user!r}" if user else "this client"
        raise fail(
            AssayError(
                f"NATS refused or did not answer a request ({type(e).__name__}: {e}): "
                f"{who} may lack a permission this command needs (reading commands need the "
                "cli user: `set -a; . <home>/nats/cli.env`), or the server is overloaded"
            )
        ) from e


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def as_command() -> None:
    """What the `assay` process (not a test invoking the app) sets before any command:
    SIGTERM unwinds like Ctrl-C, so what a command started is stopped and removed; and
    a command needs its NATS now, so a wrong address or a stopped stack is said within
    seconds (services started by `serve` and `judge` keep waiting for theirs)."""
    from assay.bus import Bus

    Bus.connect_timeout = CONNECT_TIMEOUT_S
    signal.signal(signal.SIGTERM, _terminate)


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug output.")) -> None:
    global _verbose
    _verbose = verbose
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def summarise_commands(group: typer.Typer) -> None:
    """Give each command of `group` (and of its sub-groups) a one-paragraph summary for
    the command list: typer's rich help keeps a docstring's line breaks there, so a
    description wrapped in the source broke mid-sentence on the terminal."""
    for command in group.registered_commands:
        if command.short_help is None and command.callback is not None:
            doc = inspect.cleandoc(command.callback.__doc__ or "")
            command.short_help = " ".join(doc.split("\n\n", 1)[0].split()) or None
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            summarise_commands(sub.typer_instance)
