"""Bounded previews of the office formats a run may seal: DOCX and PDF as text, XLSX as rows.

The parsing is the judge's (`assay.sealed`, with its zip-bomb refusal); the viewer's own
bounds are here: a file over `MAX_DOCUMENT_BYTES` is not parsed, text is cut at
`TEXT_CHARS` (later PDF pages are never parsed), a sheet at `TABLE_ROWS` x
`TABLE_COLUMNS`, and `read_office` parses off the event loop under a time limit.
What comes out is plain strings; the templates escape them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NamedTuple

from assay.sealed import docx_parts, open_workbook, pdf_pages

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "OFFICE_SUFFIXES",
    "Office",
    "read_office",
]

MAX_DOCUMENT_BYTES = 32 * 1024 * 1024
PARSE_SECONDS = 10.0
TEXT_CHARS = 200_000
TABLE_ROWS = 500
TABLE_COLUMNS = 60
OFFICE_SUFFIXES = (".docx", ".pdf", ".xlsx", ".xlsm")


class Office(NamedTuple):
    """What a reader got out of a document: text, or rows of a sheet, and a note."""

    text: str = ""
    rows: tuple[list[str], ...] = ()
    note: str = ""
    truncated: bool = False
    error: str = ""
    """Why the file could not be read ("" when it was)."""


def _cut(parts: list[str]) -> Office:
    text = "\n".join(parts)
    return Office(text=text[:TEXT_CHARS], truncated=len(text) > TEXT_CHARS)


def _docx(data: bytes) -> Office:
    return _cut(docx_parts(data, "the document"))


def _pdf(data: bytes) -> Office:
    parts: list[str] = []
    used = 0
    for page in pdf_pages(data):
        parts.append(page)
        used += len(page)
        if used > TEXT_CHARS:  # later pages are never parsed
            return Office(text="\n".join(parts)[:TEXT_CHARS], truncated=True)
    return _cut(parts)


def _xlsx(data: bytes) -> Office:
    with open_workbook(data, "the workbook") as book:
        names = list(book.sheetnames)
        if not names:
            return Office(note="no sheets")
        sheet = book[names[0]]
        width = min(sheet.max_column or TABLE_COLUMNS, TABLE_COLUMNS)  # declared, may be absent
        cells = sheet.iter_rows(max_row=TABLE_ROWS + 1, max_col=width, values_only=True)
        rows = [["" if v is None else str(v) for v in row] for row in cells]
    note = f"sheets: {', '.join(names)} (showing {names[0]!r})"
    return Office(rows=tuple(rows[:TABLE_ROWS]), note=note, truncated=len(rows) > TABLE_ROWS)


_READERS: dict[str, Callable[[bytes], Office]] = {
    ".docx": _docx,
    ".pdf": _pdf,
    ".xlsx": _xlsx,
    ".xlsm": _xlsx,
}


async def read_office(suffix: str, data: bytes) -> Office:
    """Read a DOCX, PDF or XLSX within the bounds; a refusal or parse error is `error`."""
    if len(data) > MAX_DOCUMENT_BYTES:
        return Office(error=f"{len(data)} bytes, over the {MAX_DOCUMENT_BYTES} byte cap")
    try:
        return await asyncio.wait_for(asyncio.to_thread(_READERS[suffix], data), PARSE_SECONDS)
    except TimeoutError:
        return Office(error=f"took over {PARSE_SECONDS:g} s to parse")
    except Exception as e:  # python-docx, pypdf, openpyxl raise many types on bad input
        return Office(error=f"{type(e).__name__}: {e}")
