"""Small DOCX, XLSX and PDF files made in memory for the viewer's preview tests."""

from __future__ import annotations

import io
import zipfile

import docx
import openpyxl  # type: ignore[import-untyped]


def docx_bytes(*paragraphs: str, table: list[list[str]] | None = None) -> bytes:
    """A Word document with these paragraphs and, optionally, one table."""
    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, text in enumerate(row):
                grid.cell(r, c).text = text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def xlsx_bytes(rows: list[list[object]], *, sheets: tuple[str, ...] = ("data",)) -> bytes:
    """A workbook whose first sheet holds `rows` (further sheets empty)."""
    book = openpyxl.Workbook()
    book.active.title = sheets[0]
    for row in rows:
        book.active.append(row)
    for name in sheets[1:]:
        book.create_sheet(name)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def pdf_bytes(*pages: str) -> bytes:
    """A PDF with one line of Helvetica text per page (enough for text extraction)."""
    n = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {n} >>"]
    font = 3 + 2 * n
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET"
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>"
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out


def zip_bomb(member: str = "word/document.xml", size: int = 70_000_000) -> bytes:
    """A small zip whose one member unpacks to `size` bytes of zeros."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member, b"\0" * size)
    return out.getvalue()
