"""The one rendering path for pages about a report: Jinja2 templates, autoescaped.

The HTML report renders `report.html.j2`; a web view includes the same `charts.svg.j2`
and `tables.html.j2` macros (or calls `render_chart`), so a leaderboard is drawn one way.
Templates live in this package's `templates/` folder and ship with the wheel; the
viewer's pages live in its own and reach these through `environment(above=...)`.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import jinja2

from .charts import BLUE, Chart
from .table import Table
from .validity_charts import validity_charts
from .validity_tables import validity_tables

__all__ = ["Table", "environment", "format_cell", "render_chart", "render_page"]


def format_cell(x: object) -> str:
    """A table cell as text: floats to 3 significant digits, NaN as an en dash."""
    if isinstance(x, float):
        return "–" if math.isnan(x) else f"{x:.3g}"
    if isinstance(x, tuple | list):
        return ", ".join(str(v) for v in x)
    return "" if x is None else str(x)


@cache
def environment(above: str | None = None) -> jinja2.Environment:
    """The shared template environment (autoescaping on, undefined names fail). `above`
    names a package higher up (the viewer) whose own `templates/` folder is searched
    first, so its pages can include this package's macros."""
    loader: jinja2.BaseLoader = jinja2.PackageLoader("assay_report", "templates")
    if above is not None:
        loader = jinja2.ChoiceLoader([jinja2.PackageLoader(above, "templates"), loader])
    env = jinja2.Environment(
        loader=loader,
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["cell"] = format_cell
    env.globals["blue"] = BLUE
    env.globals["validity_tables"] = validity_tables
    env.globals["validity_charts"] = validity_charts
    return env


def render_page(template: str, **context: Any) -> str:
    """Render one page template with `context`."""
    return environment().get_template(template).render(**context)


def render_chart(chart: Chart) -> str:
    """One chart as an inline `<svg>` element."""
    macro = environment().get_template("charts.svg.j2").module.chart  # type: ignore[attr-defined]
    return str(macro(chart))
