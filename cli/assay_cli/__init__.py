"""Command line: `assay up | submit | events | schemas export | ...`, the layer above the
services: it drives them in one process (`assay run`, `assay up --all`) or one at a time."""

from .commands import (  # noqa: F401  (register commands)
    _check,
    _core,
    _dlq,
    _doctor,
    _judge,
    _keys,
    _report,
    _retry,
    _review,
    _run,
    _serve,
    _trace,
    _view,
    _watch,
    _web,
)
from .commands._app import app, as_command, fail, summarise_commands

summarise_commands(app)

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `assay` console script."""
    as_command()
    try:
        app()
    except Exception as e:  # what no command turned into a message: still one line
        raise SystemExit(fail(e, 1).exit_code) from e
