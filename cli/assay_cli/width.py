"""How wide the command's output may be: a terminal's width, or none when piped."""

from __future__ import annotations

import os

from rich.console import Console

__all__ = ["line_width"]


def line_width(console: Console) -> int | None:
    """The columns a line may take: the terminal's (or ``COLUMNS``'s) width; None when the
    output goes to a file or a pipe with no width given, where a line is kept whole for
    whatever reads it (grep, a pager that scrolls sideways)."""
    if console.is_terminal or "COLUMNS" in os.environ:
        return console.width
    return None
