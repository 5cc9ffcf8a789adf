"""Command line: `assay up | submit | events | schemas export | ...`."""

from . import _core, _serve, _watch  # noqa: F401  (register commands)
from ._app import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `assay` console script."""
    app()
