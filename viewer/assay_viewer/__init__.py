"""`assay view`: runs, transcripts, sealed files and verdicts in the browser, live."""

from .app import create_app
from .data import Source

__all__ = ["Source", "create_app"]
