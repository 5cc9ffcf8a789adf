"""`--home <run dir>`: look at a finished run again without starting anything by hand."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from assay.config import Settings
from assay.embedded import NatsServer

from ._app import err_console

__all__ = ["HOME_HELP", "home_settings"]

HOME_HELP = (
    "A finished run directory (e.g. .assay/runs/<campaign>-<time>): its log is served "
    "read-only by a nats-server started and stopped for this command."
)


@contextmanager
def home_settings(home: Path | None, *, writable: bool = False) -> Iterator[Settings]:
    """Settings of the running stack, or of a run directory reopened for this command.

    The log is served from a copy so the run directory is never written to; the copy and
    the server go away when the command ends. `writable` (human review: verdicts are
    appended to the run's own log) serves the run directory's log itself instead.
    """
    if home is None:
        yield Settings()
        return
    log = home / "nats" / "js"
    if not log.is_dir():
        err_console.print(f"[red]error:[/red] {home} holds no log (no {log}): not a run directory")
        raise typer.Exit(2)
    if writable:
        with NatsServer(home / "nats") as server:
            yield Settings(home=home.resolve(), nats_url=server.url)
        return
    with tempfile.TemporaryDirectory(prefix="assay-home-") as scratch:
        shutil.copytree(log, Path(scratch) / "js")
        with NatsServer(Path(scratch)) as server:
            yield Settings(home=home.resolve(), nats_url=server.url)
