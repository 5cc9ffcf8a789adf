"""One titled table, as every page and the terminal draw it."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Table"]


class Table(NamedTuple):
    """One titled table: rows as dicts, shown in `columns` order."""

    title: str
    rows: list[dict[str, Any]]
    columns: list[str]
