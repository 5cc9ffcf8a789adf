"""Previews of agent-written files: always data, never markup.

Every preview is either plain text (escaped by the template), a table of strings
(escaped), an `<img>` of a raster image served by hash, or HTML made by a library that
escapes its input: markdown-it with raw HTML off, Pygments. HTML and SVG written by an
agent are shown as their source text.
"""

from __future__ import annotations

import csv
import io
from functools import cache
from pathlib import PurePosixPath
from typing import NamedTuple
from urllib.parse import quote

from markdown_it import MarkdownIt
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_for_filename
from pygments.util import ClassNotFound

from .documents import OFFICE_SUFFIXES, read_office

__all__ = [
    "IMAGE_TYPES",
    "Preview",
    "blob_headers",
    "markdown",
    "preview",
    "preview_file",
    "pygments_css",
]

PREVIEW_BYTES = 512 * 1024
"""Larger files are previewed from their first bytes (the whole file is a download)."""
TABLE_ROWS = 500
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
"""Raster images only: an SVG can carry script, so it is shown as text."""
_CODE = {
    ".py",
    ".r",
    ".jl",
    ".js",
    ".ts",
    ".sh",
    ".sql",
    ".json",
    ".yaml",
    ".yml",
    ".toml",
    ".c",
    ".h",
    ".cpp",
    ".rs",
    ".go",
    ".java",
    ".html",
    ".htm",
    ".svg",
    ".xml",
    ".css",
    ".tex",
    ".ipynb",
}


class Preview(NamedTuple):
    """How to show one file: kind is image, table, markdown, code, text, binary or
    unreadable (a document over a bound or broken: `text` says why)."""

    kind: str
    text: str = ""
    html: Markup = Markup("")
    rows: tuple[list[str], ...] = ()
    truncated: bool = False
    note: str = ""


@cache
def _markdown() -> MarkdownIt:
    # "html": False turns raw HTML in the file into escaped text; markdown-it also refuses
    # javascript:, vbscript: and data: links. "breaks": a line break stays one, so a
    # value per line is not run together into one paragraph.
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True})


def markdown(text: str) -> Markup:
    """Markdown as sanitised HTML (raw HTML escaped, script links refused)."""
    return Markup(_markdown().render(text))


def _decode(data: bytes) -> str | None:
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        # A cut through a multi-byte character at the preview limit is still text.
        return data[: e.start].decode("utf-8") if e.start > len(data) - 4 else None


def preview(path: str, data: bytes) -> Preview:
    """The preview of a file named `path` (a sealed path: only its suffix is used)."""
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in IMAGE_TYPES:
        return Preview("image")
    cut = len(data) > PREVIEW_BYTES
    text = _decode(data[:PREVIEW_BYTES])
    if text is None:
        return Preview("binary")
    if suffix in (".csv", ".tsv"):
        reader = csv.reader(io.StringIO(text), delimiter="\t" if suffix == ".tsv" else ",")
        rows = [row for _, row in zip(range(TABLE_ROWS + 1), reader, strict=False)]
        return Preview(
            "table", rows=tuple(rows[:TABLE_ROWS]), truncated=cut or len(rows) > TABLE_ROWS
        )
    if suffix in (".md", ".markdown"):
        return Preview("markdown", html=markdown(text), truncated=cut)
    if suffix in _CODE:
        try:
            lexer = get_lexer_for_filename(path, stripnl=False)
        except ClassNotFound:
            return Preview("text", text=text, truncated=cut)
        return Preview("code", html=Markup(highlight(text, lexer, HtmlFormatter())), truncated=cut)
    return Preview("text", text=text, truncated=cut)


async def preview_file(path: str, data: bytes) -> Preview:
    """`preview`, plus DOCX and PDF as text and XLSX as a table, read within bounds."""
    suffix = PurePosixPath(path).suffix.lower()
    if suffix not in OFFICE_SUFFIXES:
        return preview(path, data)
    got = await read_office(suffix, data)
    if got.error:
        return Preview("unreadable", text=got.error)
    if suffix in (".xlsx", ".xlsm"):
        return Preview("table", rows=got.rows, note=got.note, truncated=got.truncated)
    return Preview("text", text=got.text, truncated=got.truncated)


def pygments_css() -> str:
    """The style sheet for highlighted code (served with the viewer's CSS)."""
    return str(HtmlFormatter().get_style_defs(".highlight"))


def blob_headers(name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Content type and disposition for a blob: raster images and plain text inline,
    anything else a download; a name only ever picks among these."""
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    filename = quote(name.rsplit("/", 1)[-1] or "blob")
    if suffix in IMAGE_TYPES:
        return IMAGE_TYPES[suffix], (
            ("content-disposition", f"inline; filename*=UTF-8''{filename}"),
        )
    attach = ("content-disposition", f"attachment; filename*=UTF-8''{filename}")
    return "text/plain; charset=utf-8", (
        attach,
        ("content-security-policy", "default-src 'none'; sandbox"),
    )
