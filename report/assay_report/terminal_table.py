"""Tables in a terminal: a titled table when it fits, stacked rows when it does not; the
cell formats every terminal section shares."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["cell", "ci", "pct", "print_table"]


def cell(x: float | None, digits: int = 2) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def ci(lo: float, hi: float, digits: int = 2) -> str:
    return f"[{cell(lo, digits)}, {cell(hi, digits)}]"


def pct(x: float) -> str:
    return "–" if math.isnan(x) else f"{100 * x:.1f}%"


_KEYS = {"group", "agent", "judge", "judges", "tag"}
"""Columns that name what a row is about: the heading of a row in the stacked layout."""
_TEXT = {"stage", "kind", "family", "model", "error class", "first message"}


def print_table(
    console: Console,
    title: str,
    columns: Sequence[str],
    rows: list[list[str]],
    *,
    keys: int | None = None,
    label_keys: bool = False,
) -> None:
    """A titled table if it fits the console, else stacked rows; nothing when no rows.

    `keys`: how many leading columns head a stacked row (default: the first column and
    the naming columns right after it); `label_keys`: the heading names those columns
    ("seq 5 · consumer judge") where bare values would not say what they are.
    """
    if not rows:
        return
    console.print(Text(title, style="bold"))
    table = Table()
    for i, col in enumerate(columns):
        label = i == 0 or col in _KEYS or col in _TEXT
        table.add_column(col, justify="left" if label else "right", no_wrap=True)
    for row in rows:
        table.add_row(*map(Text, row))  # names and errors are data, never markup
    unbounded = console.options.update(max_width=1_000_000)  # measure, don't clamp
    if Measurement.get(console, unbounded, table).maximum <= console.width:
        console.print(table)
    else:
        if keys is None:
            named = (i for i, col in enumerate(columns) if i > 0 and col not in _KEYS)
            keys = next(named, len(columns))
        _stacked(console, columns, rows, keys, label_keys)


def _stacked(
    console: Console, columns: Sequence[str], rows: list[list[str]], keys: int, labels: bool
) -> None:
    """Each row as its heading, then `column: value` fields packed into indented lines;
    empty values are left out (no "subject: " with nothing after it)."""
    for row in rows:
        head = zip(columns[:keys], row[:keys], strict=True)
        _pack(console, [f"{c} {v}" if labels else v for c, v in head if v], "  ")
        fields = zip(columns[keys:], row[keys:], strict=True)
        _pack(console, [f"{c}: {v}" for c, v in fields if v], "    ")


def _pack(console: Console, parts: Sequence[str], indent: str) -> None:
    """Print parts joined by " · ", breaking lines only between parts; a part of prose
    longer than a line wraps between its words, its further lines indented."""
    line = ""
    for part in parts:
        if line and len(indent) + len(line) + 3 + len(part) > console.width:
            console.print(Text(indent + line), soft_wrap=True)
            line = ""
        if not line and len(indent) + len(part) > console.width and " " in part:
            wrapped = textwrap.wrap(
                part,
                console.width - len(indent),
                subsequent_indent="  ",
                break_long_words=False,
                break_on_hyphens=False,
            )
            for piece in wrapped[:-1]:
                console.print(Text(indent + piece), soft_wrap=True)
            part = wrapped[-1]
        line = f"{line} · {part}" if line else part
    if line:
        console.print(Text(indent + line), soft_wrap=True)
