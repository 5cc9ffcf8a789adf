"""The viewer's pages: its own templates (`templates/view/`) over the report's, in the
report's one autoescaped environment, so a leaderboard is drawn one way everywhere."""

from __future__ import annotations

from collections.abc import Iterable
from importlib.resources import files
from typing import Any

import jinja2
from markupsafe import Markup

from assay_report.pages import environment

__all__ = ["VIEWER", "WEB_SOURCE", "render_page", "report_css", "static", "view_environment"]

VIEWER = "assay_viewer"
"""The package whose `templates/` folder holds the viewer's pages."""


WEB_SOURCE = "web-source:"
"""How a judge names a web answer the agent received when it opens one (`web-source:3`,
`assay_judge.files.SOURCE_PREFIX`): in a verdict's opened files, never a sealed file."""


def _web_source(name: object) -> bool:
    return str(name).startswith(WEB_SOURCE)


def _words(names: Iterable[object]) -> Markup:
    """Names in Jinja's `sort` order (case ignored), comma-separated, each breakable after
    the underscores between its words (analysis_not_/executed), never inside a word: the
    runs table's tags and failed checks. A filter, not a macro: the macro's calls, two a
    row, were a fifth of the campaign page's time."""
    spans = (
        Markup('<span class="word">') + Markup("_<wbr>").join(str(n).split("_")) + Markup("</span>")
        for n in sorted(names, key=lambda n: str(n).lower())
    )
    return Markup(", ").join(spans)


def view_environment() -> jinja2.Environment:
    """The report's environment with the viewer's templates searched first, and the
    viewer's own tests (`web_source`) and filters (`words`)."""
    env = environment(VIEWER)
    env.tests["web_source"] = _web_source
    env.filters["words"] = _words
    return env


def render_page(template: str, **context: Any) -> str:
    """Render one of the viewer's page templates (``view/...``) with `context`."""
    return view_environment().get_template(template).render(**context)


def static(name: str) -> bytes:
    """One of the viewer's static files (`templates/view/<name>`: scripts, styles)."""
    return files(VIEWER).joinpath("templates", "view", name).read_bytes()


def report_css() -> bytes:
    """The report's stylesheet, which the viewer's pages start from."""
    return files("assay_report").joinpath("templates", "report.css").read_bytes()
