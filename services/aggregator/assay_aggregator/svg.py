"""Tiny dependency-free SVG charts for the HTML report (inline, no network, deterministic).

Three shapes cover every plot of the report: intervals (bars or dots with whiskers),
heatmaps, and labelled scatter plots. Each returns one ``<svg>`` element as text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

__all__ = ["heatmap", "intervals", "scatter"]

_FONT = 'font-family="sans-serif" font-size="12"'
_BLUE = "#3b6ea8"


def _num(x: float) -> str:
    return f"{x:.1f}"


def _ok(x: float) -> bool:
    return not math.isnan(x) and math.isfinite(x)


def _frame(width: int, height: int, title: str, body: list[str]) -> str:
    width = max(width, int(16 + 7.5 * len(title)))  # never clip the bold title
    head = (
        f'<svg width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">'
        f'<text x="8" y="18" {_FONT} font-weight="bold">{escape(title)}</text>'
    )
    return head + "".join(body) + "</svg>"


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
) -> str:
    """Horizontal bars (or dots) with interval whiskers, one row per label."""
    left, width, row = 150, 420, 24
    height = 50 + row * len(labels) + 20
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return left + width * (min(max(v, lo), hi) - lo) / span

    body: list[str] = []
    for tick in range(6):
        v = lo + span * tick / 5
        body.append(f'<line x1="{_num(x(v))}" y1="34" x2="{_num(x(v))}" y2="{height - 20}" stroke="#ddd"/>'
                    f'<text x="{_num(x(v))}" y="{height - 6}" {_FONT} text-anchor="middle">{v:g}</text>')  # fmt: skip
    if marker is not None:
        body.append(f'<line x1="{_num(x(marker))}" y1="34" x2="{_num(x(marker))}" y2="{height - 20}" '
                    'stroke="#c33" stroke-dasharray="4 3"/>')  # fmt: skip
    for i, label in enumerate(labels):
        y = 44 + row * i
        body.append(
            f'<text x="{left - 6}" y="{y + 12}" {_FONT} text-anchor="end">{escape(label)}</text>'
        )
        v, a, b = values[i], lows[i], highs[i]
        if _ok(v):
            if bars:
                body.append(
                    f'<rect x="{left}" y="{y + 3}" width="{_num(x(v) - left)}" height="14" fill="{_BLUE}" opacity="0.75"/>'
                )
            else:
                body.append(f'<circle cx="{_num(x(v))}" cy="{y + 10}" r="4" fill="{_BLUE}"/>')
        if _ok(a) and _ok(b):
            body.append(f'<line x1="{_num(x(a))}" y1="{y + 10}" x2="{_num(x(b))}" y2="{y + 10}" stroke="#222" stroke-width="1.5"/>'
                        f'<line x1="{_num(x(a))}" y1="{y + 5}" x2="{_num(x(a))}" y2="{y + 15}" stroke="#222"/>'
                        f'<line x1="{_num(x(b))}" y1="{y + 5}" x2="{_num(x(b))}" y2="{y + 15}" stroke="#222"/>')  # fmt: skip
        if note is not None:
            body.append(
                f'<text x="{left + width + 8}" y="{y + 12}" {_FONT}>{escape(note[i])}</text>'
            )
    return _frame(left + width + 110, height, title, body)


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
) -> str:
    """A rows × cols grid of cells shaded by value, each labelled with its number."""
    # Column labels are rotated -40°: each reaches ~4.6 px a char up and ~5.5 to the right.
    longest = max((len(c) for c in cols), default=0)
    left, top, cw, ch = 150, max(110, int(30 + 4.6 * longest)), 64, 24
    overhang = int(5.5 * longest)
    width, height = left + cw * len(cols) + max(20, overhang), top + ch * len(rows) + 20
    span = (vmax - vmin) or 1.0
    body: list[str] = []
    for j, col in enumerate(cols):
        cx = left + cw * j + cw / 2
        body.append(
            f'<text transform="translate({_num(cx)},{top - 6}) rotate(-40)" {_FONT}>{escape(col)}</text>'
        )
    for i, row in enumerate(rows):
        y = top + ch * i
        body.append(
            f'<text x="{left - 6}" y="{y + 16}" {_FONT} text-anchor="end">{escape(row)}</text>'
        )
        for j in range(len(cols)):
            v = values[i][j]
            t = (v - vmin) / span if _ok(v) else math.nan
            ink = "#fff" if _ok(t) and t > 0.6 else "#000"
            text = fmt.format(v) if _ok(v) else "–"
            body.append(f'<rect x="{left + cw * j}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="{_color(t)}"/>'
                        f'<text x="{_num(left + cw * j + cw / 2)}" y="{y + 16}" {_FONT} text-anchor="middle" fill="{ink}">{text}</text>')  # fmt: skip
    return _frame(width, height, title, body)


def scatter(
    points: Sequence[tuple[str, float, float]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    lo: float,
    hi: float,
) -> str:
    """Labelled points on a square plot with the y = x diagonal."""
    left, top, size = 60, 36, 360
    span = (hi - lo) or 1.0

    def px(v: float) -> float:
        return left + size * (v - lo) / span

    def py(v: float) -> float:
        return top + size - size * (v - lo) / span

    body = [
        f'<rect x="{left}" y="{top}" width="{size}" height="{size}" fill="none" stroke="#999"/>',
        f'<line x1="{px(lo)}" y1="{py(lo)}" x2="{px(hi)}" y2="{py(hi)}" stroke="#c33" stroke-dasharray="4 3"/>',
        f'<text x="{left + size / 2}" y="{top + size + 30}" {_FONT} text-anchor="middle">{escape(xlabel)}</text>',
        f'<text transform="translate(16,{top + size / 2}) rotate(-90)" {_FONT} text-anchor="middle">{escape(ylabel)}</text>',
    ]  # fmt: skip
    for tick in range(6):
        v = lo + span * tick / 5
        body.append(f'<text x="{_num(px(v))}" y="{top + size + 14}" {_FONT} text-anchor="middle">{v:g}</text>'
                    f'<text x="{left - 4}" y="{_num(py(v) + 4)}" {_FONT} text-anchor="end">{v:g}</text>')  # fmt: skip
    for label, xv, yv in points:
        if _ok(xv) and _ok(yv):
            body.append(f'<circle cx="{_num(px(xv))}" cy="{_num(py(yv))}" r="5" fill="{_BLUE}"/>'
                        f'<text x="{_num(px(xv) + 7)}" y="{_num(py(yv) - 6)}" {_FONT}>{escape(label)}</text>')  # fmt: skip
    return _frame(left + size + 120, top + size + 44, title, body)
