"""The viewer's pages: its own templates (`templates/view/`) over the report's, in the
report's one autoescaped environment, so a leaderboard is drawn one way everywhere."""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import jinja2

from assay_report.pages import environment

__all__ = ["VIEWER", "render_page", "report_css", "static", "view_environment"]

VIEWER = "assay_viewer"
"""The package whose `templates/` folder holds the viewer's pages."""


def view_environment() -> jinja2.Environment:
    """The report's environment with the viewer's templates searched first."""
    return environment(VIEWER)


def render_page(template: str, **context: Any) -> str:
    """Render one of the viewer's page templates (``view/...``) with `context`."""
    return view_environment().get_template(template).render(**context)


def static(name: str) -> bytes:
    """One of the viewer's static files (`templates/view/<name>`: scripts, styles)."""
    return files(VIEWER).joinpath("templates", "view", name).read_bytes()


def report_css() -> bytes:
    """The report's stylesheet, which the viewer's pages start from."""
    return files("assay_report").joinpath("templates", "report.css").read_bytes()
