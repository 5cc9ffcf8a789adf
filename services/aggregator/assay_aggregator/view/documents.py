"""Bounded readers for the office formats a run may seal: DOCX and PDF as text, XLSX as rows.

The same bounds as the judge's readers (`assay_judge.readers`), kept here so the viewer
does not depend on the judge service: a file over `MAX_DOCUMENT_BYTES` is not parsed, a
zip container (docx, xlsx) whose members would unpack beyond `MAX_UNPACKED_BYTES` is
refused before parsing, and `read_office` parses off the event loop under a time limit.
What comes out is plain strings; the templates escape them.
"""

from __future__ import annotations

import asyncio
import io
import zipfile
from collections.abc import Callable
from typing import NamedTuple

from assay_schemas import InvalidInput

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_UNPACKED_BYTES",
    "OFFICE_SUFFIXES",
    "Office",
    "read_office",
]

MAX_DOCUMENT_BYTES = 32 * 1024 * 1024
MAX_UNPACKED_BYTES = 64_000_000
"""Largest total a docx/xlsx may unpack to; zip members are measured before reading."""
MAX_MEMBERS = 10_000
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


class _Refused(InvalidInput):
    """The file is over a bound; its message says which."""


def _check_unpacked(data: bytes) -> None:
    """Refuse a zip whose directory declares more than the bounds (zipfile never inflates
    a member past its declared size, so a lying directory cannot get more through)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = archive.infolist()
    if len(members) > MAX_MEMBERS:
        raise _Refused(f"holds {len(members)} zip members, over the {MAX_MEMBERS} cap")
    total = sum(m.file_size for m in members)
    if total > MAX_UNPACKED_BYTES:
        raise _Refused(f"unpacks to {total} bytes, over the {MAX_UNPACKED_BYTES} byte cap")


def _cut(parts: list[str]) -> Office:
    text = "\n".join(parts)
    return Office(text=text[:TEXT_CHARS], truncated=len(text) > TEXT_CHARS)


def _docx(data: bytes) -> Office:
    _check_unpacked(data)
    import docx

    document = docx.Document(io.BytesIO(data))
    parts = [p.text for p in document.paragraphs if p.text.strip()]
    for i, table in enumerate(document.tables):
        parts.append(f"[table {i + 1}]")
        parts.extend(" | ".join(c.text for c in row.cells) for row in table.rows)
    return _cut(parts)


def _pdf(data: bytes) -> Office:
    from pypdf import PdfReader

    parts: list[str] = []
    used = 0
    for i, page in enumerate(PdfReader(io.BytesIO(data)).pages):
        if used > TEXT_CHARS:  # later pages are never parsed
            return Office(text="\n".join(parts)[:TEXT_CHARS], truncated=True)
        parts.append(f"[page {i + 1}]\n{page.extract_text() or ''}")
        used += len(parts[-1])
    return _cut(parts)


def _xlsx(data: bytes) -> Office:
    _check_unpacked(data)
    import openpyxl  # type: ignore[import-untyped]

    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        names = list(book.sheetnames)
        if not names:
            return Office(note="no sheets")
        sheet = book[names[0]]
        width = min(sheet.max_column or TABLE_COLUMNS, TABLE_COLUMNS)  # declared, may be absent
        cells = sheet.iter_rows(max_row=TABLE_ROWS + 1, max_col=width, values_only=True)
        rows = [["" if v is None else str(v) for v in row] for row in cells]
    finally:
        book.close()
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
