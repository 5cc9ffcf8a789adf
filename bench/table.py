"""Benchmark rows and the table they print as."""

from __future__ import annotations

import statistics
from typing import NamedTuple

from rich.console import Console
from rich.table import Table

__all__ = ["Row", "breaches_row", "percentile", "print_rows"]


class Row(NamedTuple):
    """One measured figure, with its baseline from the same run where there is one."""

    group: str
    name: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    target: str = ""

    @property
    def ratio(self) -> float | None:
        """value / baseline."""
        if not self.baseline:
            return None
        return self.value / self.baseline


def breaches_row(group: str, name: str, breaches: tuple[str, ...]) -> Row:
    """`assay check`'s breaches as a row: how many, the first one named, 0 the target."""
    first = f": {breaches[0][:120]}" if breaches else ""
    return Row(group, name + first, float(len(breaches)), "breaches", target="0")


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) of values, by linear interpolation."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return (
        statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]
        if 1 <= q <= 99
        else (min(values) if q <= 0 else max(values))
    )


def print_rows(rows: list[Row], console: Console | None = None) -> None:
    """Print one table of every row."""
    table = Table(title="assay bench", show_lines=False)
    for col in ("group", "figure", "value", "unit", "baseline", "ratio", "target"):
        table.add_column(col, justify="right" if col in {"value", "baseline", "ratio"} else "left")
    for r in rows:
        base = f"{r.baseline:,.2f} ({r.baseline_name})" if r.baseline is not None else ""
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else ""
        table.add_row(r.group, r.name, f"{r.value:,.2f}", r.unit, base, ratio, r.target)
    (console or Console(width=200)).print(table)
