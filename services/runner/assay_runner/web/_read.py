"""A fetched body as the agent reads it: HTML as Markdown, PDFs as page text, text as is.

HTML goes through trafilatura (main content as Markdown; lxml parses in linear time and
drops scripts and styles); PDFs through the reader the judges use (`assay.sealed`).
Parsing runs in a worker thread under a time limit: past it the agent is told, and the
thread (bounded by the byte cap on the body) finishes on its own.
"""

from __future__ import annotations

import asyncio

from assay_schemas import InvalidInput

__all__ = ["HTML_TYPES", "READABLE_TYPES", "ReadRefused", "readable_text"]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PDF_TYPES = frozenset({"application/pdf"})
TEXT_TYPES = frozenset(
    {
        "text/plain",
        "text/markdown",
        "text/csv",
        "text/tab-separated-values",
        "text/xml",
        "application/xml",
        "application/json",
        "application/ld+json",
        "application/atom+xml",
        "application/rss+xml",
        "application/x-bibtex",
    }
)
READABLE_TYPES = HTML_TYPES | PDF_TYPES | TEXT_TYPES
"""Content types web_fetch reads; others are named and refused."""
PARSE_TIME_S = 10.0


class ReadRefused(InvalidInput):
    """A body that cannot be read as text; the message is for the agent."""


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", "replace")
    except LookupError:
        return body.decode("utf-8", "replace")


MAX_ATTRIBUTE_CHARS = 2048
"""Longer attribute values (hostile, or inline data) are dropped before extraction."""


def _html(body: bytes, charset: str | None) -> str:
    import trafilatura
    from trafilatura.utils import load_html

    # lxml parses in linear time; the tree is defused before trafilatura walks it, whose
    # own passes over huge attribute values are slow.
    tree = load_html(_decode(body, charset))
    if tree is None:
        return ""
    for element in list(tree.iter()):
        if not isinstance(element.tag, str) or element.tag in ("script", "style", "noscript"):
            if element.getparent() is not None:
                element.getparent().remove(element)
            continue
        for name, value in list(element.attrib.items()):
            if len(value) > MAX_ATTRIBUTE_CHARS:
                del element.attrib[name]
    meta = trafilatura.extract_metadata(tree)
    text = trafilatura.extract(
        tree, output_format="markdown", include_links=True, include_tables=True, favor_recall=True
    )
    if not text:
        return trafilatura.html2txt(tree, clean=True) or ""
    title = meta.title if meta is not None and meta.title else ""
    if title and title not in text.split("\n", 1)[0]:
        return f"# {title}\n\n{text}"
    return text


def _pdf(body: bytes) -> str:
    from assay.sealed import pdf_pages

    try:
        return "\n".join(pdf_pages(body))
    except Exception as e:  # pypdf raises many types on a malformed or cut file
        raise ReadRefused(f"the PDF could not be read: {type(e).__name__}: {e}") from e


def _parse(media_type: str, body: bytes, charset: str | None) -> str:
    if media_type in HTML_TYPES:
        return _html(body, charset)
    if media_type in PDF_TYPES:
        return _pdf(body)
    return _decode(body, charset)


async def readable_text(media_type: str, body: bytes, charset: str | None) -> str:
    """The body as text for the agent; ReadRefused names an unreadable type or a slow parse."""
    if media_type not in READABLE_TYPES:
        kind = media_type or "no content type"
        raise ReadRefused(
            f"{kind} is not readable by web_fetch (it reads HTML, PDF, plain text, JSON, XML)"
        )
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(_parse, media_type, body, charset), PARSE_TIME_S
        )
    except TimeoutError as e:
        raise ReadRefused(f"the page took over {PARSE_TIME_S:g} s to read and was skipped") from e
