"""The report's charts as data: every position computed here, drawn by `templates/charts.svg.j2`.

Three shapes cover every plot: intervals (bars or dots with whiskers), heatmaps, and
labelled scatter plots. A chart is plain data (no markup), so the HTML report and any other
page that includes the same template macros draw the same leaderboard the same way.
Coordinates are rounded here to one decimal, which keeps the SVG byte-identical on replay.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Chart", "Heatmap", "Intervals", "Scatter", "heatmap", "intervals", "scatter"]

BLUE = "#3b6ea8"


def _num(x: float) -> str:
    return f"{x:.1f}"


def _ok(x: float) -> bool:
    return not math.isnan(x) and math.isfinite(x)


def _frame_width(width: int, title: str) -> int:
    return max(width, int(16 + 7.5 * len(title)))  # never clip the bold title


@dataclass(frozen=True)
class Tick:
    """One axis tick: where, and its label."""

    at: str
    label: str


@dataclass(frozen=True)
class IntervalRow:
    """One labelled row of an interval chart; coordinates are pre-formatted."""

    y: int
    label: str
    bar_width: str | None = None
    dot_x: str | None = None
    whisker: tuple[str, str] | None = None
    note: str | None = None


@dataclass(frozen=True)
class Intervals:
    """Horizontal bars (or dots) with interval whiskers."""

    title: str
    width: int
    height: int
    left: int
    note_x: int
    ticks: list[Tick]
    rows: list[IntervalRow]
    marker: str | None = None
    kind: Literal["intervals"] = "intervals"


@dataclass(frozen=True)
class Cell:
    """One heatmap cell."""

    x: int
    text_x: str
    fill: str
    ink: str
    text: str


@dataclass(frozen=True)
class HeatmapRow:
    """One heatmap row: its label and cells."""

    y: int
    label: str
    cells: list[Cell]


@dataclass(frozen=True)
class Heatmap:
    """A rows × cols grid of cells shaded by value, each labelled with its number."""

    title: str
    width: int
    height: int
    left: int
    top: int
    cell_width: int
    cell_height: int
    columns: list[tuple[str, str]]
    """(x, label) of each rotated column label."""
    rows: list[HeatmapRow] = field(default_factory=list)
    kind: Literal["heatmap"] = "heatmap"


@dataclass(frozen=True)
class Point:
    """One labelled scatter point."""

    x: str
    y: str
    label_x: str
    label_y: str
    label: str


@dataclass(frozen=True)
class Scatter:
    """Labelled points on a square plot with the y = x diagonal."""

    title: str
    width: int
    height: int
    left: int
    top: int
    size: int
    diagonal: tuple[float, float, float, float]
    xlabel: str
    ylabel: str
    ticks: list[tuple[str, str, str]]
    """(x of the x-axis tick, y of the y-axis tick, label) per tick."""
    points: list[Point]
    kind: Literal["scatter"] = "scatter"


Chart = Intervals | Heatmap | Scatter


def intervals(
    labels: Sequence[str],
    values: Sequence[float],
    lows: Sequence[float],
    highs: Sequence[float],
    *,
    title: str,
    lo: float,
    hi: float,
    bars: bool = True,
    note: Sequence[str] | None = None,
    marker: float | None = None,
    left: int = 150,
) -> Intervals:
    """One row per label: a bar (or dot) at the value, a whisker from low to high;
    ``left`` px of labels before the axis."""
    width, row = 420, 24
    height = 50 + row * len(labels) + 20
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return left + width * (min(max(v, lo), hi) - lo) / span

    ticks = [Tick(_num(x(lo + span * t / 5)), f"{lo + span * t / 5:g}") for t in range(6)]
    rows: list[IntervalRow] = []
    for i, label in enumerate(labels):
        v, a, b = values[i], lows[i], highs[i]
        rows.append(
            IntervalRow(
                y=44 + row * i,
                label=label,
                bar_width=_num(x(v) - left) if bars and _ok(v) else None,
                dot_x=_num(x(v)) if not bars and _ok(v) else None,
                whisker=(_num(x(a)), _num(x(b))) if _ok(a) and _ok(b) else None,
                note=note[i] if note is not None else None,
            )
        )
    return Intervals(
        title=title,
        width=_frame_width(left + width + 110, title),
        height=height,
        left=left,
        note_x=left + width + 8,
        ticks=ticks,
        rows=rows,
        marker=_num(x(marker)) if marker is not None else None,
    )


def _color(t: float) -> str:
    """White → blue ramp for t in [0, 1]; grey for missing."""
    if not _ok(t):
        return "#eee"
    t = min(max(t, 0.0), 1.0)
    r, g, b = (int(255 + (c - 255) * t) for c in (40, 90, 160))
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(
    rows: Sequence[str],
    cols: Sequence[str],
    values: Sequence[Sequence[float]],
    *,
    title: str,
    vmin: float,
    vmax: float,
    fmt: str = "{:.1f}",
) -> Heatmap:
    """A rows × cols grid shaded white → blue from vmin to vmax; missing cells grey."""
    # Column labels are rotated -40°: each reaches ~4.6 px a char up and ~5.5 to the right.
    longest = max((len(c) for c in cols), default=0)
    left, top, cw, ch = 150, max(110, int(30 + 4.6 * longest)), 64, 24
    width = left + cw * len(cols) + max(20, int(5.5 * longest))
    span = (vmax - vmin) or 1.0
    grid: list[HeatmapRow] = []
    for i, label in enumerate(rows):
        cells: list[Cell] = []
        for j in range(len(cols)):
            v = values[i][j]
            t = (v - vmin) / span if _ok(v) else math.nan
            cells.append(
                Cell(
                    x=left + cw * j,
                    text_x=_num(left + cw * j + cw / 2),
                    fill=_color(t),
                    ink="#fff" if _ok(t) and t > 0.6 else "#000",
                    text=fmt.format(v) if _ok(v) else "–",
                )
            )
        grid.append(HeatmapRow(top + ch * i, label, cells))
    return Heatmap(
        title=title,
        width=_frame_width(width, title),
        height=top + ch * len(rows) + 20,
        left=left,
        top=top,
        cell_width=cw,
        cell_height=ch,
        columns=[(_num(left + cw * j + cw / 2), c) for j, c in enumerate(cols)],
        rows=grid,
    )


def scatter(
    points: Sequence[tuple[str, float, float]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    lo: float,
    hi: float,
) -> Scatter:
    """Labelled (label, x, y) points on a square lo..hi plot; missing points left out."""
    left, top, size = 60, 36, 360
    span = (hi - lo) or 1.0

    def px(v: float) -> float:
        return left + size * (v - lo) / span

    def py(v: float) -> float:
        return top + size - size * (v - lo) / span

    steps = [lo + span * t / 5 for t in range(6)]
    return Scatter(
        title=title,
        width=_frame_width(left + size + 120, title),
        height=top + size + 44,
        left=left,
        top=top,
        size=size,
        diagonal=(px(lo), py(lo), px(hi), py(hi)),
        xlabel=xlabel,
        ylabel=ylabel,
        ticks=[(_num(px(v)), _num(py(v) + 4), f"{v:g}") for v in steps],
        points=[
            Point(_num(px(x)), _num(py(y)), _num(px(x) + 7), _num(py(y) - 6), label)
            for label, x, y in points
            if _ok(x) and _ok(y)
        ],
    )
