"""Pure readers over sealed file bytes: text pages, tables, documents, images.

Each returns plain text (or image bytes) for a judge's tool result; none touches the
store, the bus or the network. Errors are `ReadError` with a message a model can act on.
Zip-based formats (docx, xlsx) are refused before parsing when their members would unpack
beyond `MAX_UNPACKED_BYTES`: a small file of highly compressed XML cannot cost minutes and
gigabytes. The caller runs readers off the event loop with a time limit (see `tools`).
"""

from __future__ import annotations

import io
import struct
import zipfile
from typing import NamedTuple

import polars as pl

from assay_schemas import InvalidInput

__all__ = [
    "DOCUMENT_SUFFIXES",
    "IMAGE_SUFFIXES",
    "MAX_UNPACKED_BYTES",
    "TABLE_SUFFIXES",
    "ImageInfo",
    "ReadError",
    "TextPage",
    "check_unpacked",
    "image_info",
    "is_binary",
    "read_document",
    "read_table",
    "text_page",
]

TABLE_SUFFIXES = (".csv", ".tsv", ".tab", ".xlsx", ".xlsm", ".parquet", ".pq")
DOCUMENT_SUFFIXES = (".docx", ".pdf")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
MAX_UNPACKED_BYTES = 64_000_000
"""Largest total a docx/xlsx may unpack to; zip members are measured before reading."""
_MAX_MEMBERS = 10_000


class ReadError(InvalidInput):
    """A file cannot be read the way the tool was asked to."""


class TextPage(NamedTuple):
    """One page of a text file, by lines."""

    text: str
    first_line: int
    """0-based index of the first line shown."""
    lines_shown: int
    total_lines: int
    truncated: bool
    """True when the character cap cut the page short."""


class ImageInfo(NamedTuple):
    """An image's format and pixel size, read from its header."""

    media_type: str
    width: int
    height: int


def is_binary(data: bytes) -> bool:
    """Heuristic: NUL bytes, or text that is not UTF-8, in the first 8 KiB."""
    head = data[:8192]
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        # A multi-byte character cut at the 8 KiB boundary is still text.
        return e.start < len(head) - 4
    return False


def text_page(data: bytes, *, offset: int, limit: int, max_chars: int) -> TextPage:
    """Lines `offset .. offset+limit` of a text file, capped at `max_chars` characters."""
    if is_binary(data):
        raise ReadError("binary file: use read_table, read_document or view_image instead")
    lines = data.decode("utf-8", errors="replace").splitlines()
    offset = max(0, offset)
    chosen = lines[offset : offset + max(1, limit)]
    out: list[str] = []
    used = 0
    truncated = False
    for line in chosen:
        if used + len(line) + 1 > max_chars:
            out.append(line[: max(0, max_chars - used)])
            truncated = True
            break
        out.append(line)
        used += len(line) + 1
    return TextPage("\n".join(out), offset, len(out), len(lines), truncated)


def check_unpacked(data: bytes, path: str, max_bytes: int = MAX_UNPACKED_BYTES) -> None:
    """Refuse a zip container (docx, xlsx) whose members would unpack beyond `max_bytes`.

    The sizes come from the zip's directory; Python's zipfile never inflates a member past
    its declared size, so a lying directory cannot get more through."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError) as e:
        raise ReadError(f"cannot open {path}: not a valid zip container: {e}") from e
    if len(members) > _MAX_MEMBERS:
        raise ReadError(f"{path} holds {len(members)} zip members, over the {_MAX_MEMBERS} cap")
    total = sum(m.file_size for m in members)
    if total > max_bytes:
        raise ReadError(f"{path} unpacks to {total} bytes, over the {max_bytes} byte cap; not read")


def _frame(data: bytes, suffix: str, sheet: str | None) -> tuple[pl.DataFrame, str]:
    """Parse a table; returns the frame and a note (e.g. the sheets of a workbook)."""
    source = io.BytesIO(data)
    if suffix in (".csv", ".tsv", ".tab"):
        sep = "," if suffix == ".csv" else "\t"
        frame = pl.read_csv(
            source,
            separator=sep,
            infer_schema_length=10_000,
            truncate_ragged_lines=True,
            ignore_errors=True,
        )
        return frame, ""
    if suffix in (".parquet", ".pq"):
        return pl.read_parquet(source), ""
    return _excel(data, sheet)


def _excel(data: bytes, sheet: str | None) -> tuple[pl.DataFrame, str]:
    check_unpacked(data, "the workbook")
    import openpyxl  # type: ignore[import-untyped]

    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        names = list(book.sheetnames)
        name = sheet or names[0]
        if name not in names:
            raise ReadError(f"no sheet {name!r}; sheets: {', '.join(names)}")
        note = f"sheets: {', '.join(names)} (showing {name!r})"
        try:
            return pl.read_excel(io.BytesIO(data), sheet_name=name, engine="openpyxl"), note
        except Exception:  # polars' openpyxl path rejects some sheets; read the cells directly
            rows = [list(r) for r in book[name].iter_rows(values_only=True)]
    finally:
        book.close()
    if not rows:
        return pl.DataFrame(), note
    header = [str(h) if h is not None else f"column_{i}" for i, h in enumerate(rows[0])]
    body = [[None if v is None else str(v) for v in r] for r in rows[1:]]
    return pl.DataFrame(body, schema=header, orient="row"), note


def read_table(data: bytes, path: str, *, head: int = 10, sheet: str | None = None) -> str:
    """Shape, dtypes, the first `head` rows and a column summary of a table file."""
    suffix = "." + path.rsplit(".", 1)[-1].lower() if "." in path else ""
    if suffix not in TABLE_SUFFIXES:
        raise ReadError(f"not a table file ({', '.join(TABLE_SUFFIXES)}): {path}")
    try:
        frame, note = _frame(data, suffix, sheet)
    except ReadError:
        raise
    except Exception as e:  # polars/openpyxl raise many types on malformed input
        raise ReadError(f"cannot parse {path} as a table: {type(e).__name__}: {e}") from e
    head = min(max(1, head), 50)
    with pl.Config(tbl_rows=head + 2, tbl_cols=30, fmt_str_lengths=40, tbl_width_chars=200):
        parts = [
            f"shape: {frame.height} rows x {frame.width} columns",
            *([note] if note else []),
            "dtypes: " + ", ".join(f"{k}: {v}" for k, v in frame.schema.items()),
            f"head({head}):\n{frame.head(head)}",
        ]
        if frame.width and frame.height:
            parts.append(f"summary:\n{frame.describe()}")
    return "\n".join(parts)


def read_document(data: bytes, path: str) -> str:
    """The text of a DOCX (paragraphs, then tables) or a PDF (page by page)."""
    lower = path.lower()
    try:
        if lower.endswith(".docx"):
            check_unpacked(data, path)
            import docx

            document = docx.Document(io.BytesIO(data))
            parts = [p.text for p in document.paragraphs if p.text.strip()]
            for i, table in enumerate(document.tables):
                parts.append(f"[table {i + 1}]")
                parts.extend(" | ".join(c.text for c in row.cells) for row in table.rows)
            return "\n".join(parts)
        if lower.endswith(".pdf"):
            from pypdf import PdfReader

            reader = PdfReader(io.BytesIO(data))
            return "\n".join(
                f"[page {i + 1}]\n{page.extract_text() or ''}"
                for i, page in enumerate(reader.pages)
            )
    except ReadError:
        raise
    except Exception as e:  # python-docx/pypdf raise many types on malformed input
        raise ReadError(f"cannot parse {path} as a document: {type(e).__name__}: {e}") from e
    raise ReadError(f"not a document file (.docx, .pdf): {path}")


def image_info(data: bytes) -> ImageInfo:
    """Format and size of a PNG or JPEG, from its header; ReadError otherwise."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return ImageInfo("image/png", width, height)
    if data.startswith(b"\xff\xd8"):
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            length = int.from_bytes(data[i + 2 : i + 4], "big")
            if marker in (0xC0, 0xC1, 0xC2):  # start of frame: height, width follow
                height, width = struct.unpack(">HH", data[i + 5 : i + 9])
                return ImageInfo("image/jpeg", width, height)
            i += 2 + length
        return ImageInfo("image/jpeg", 0, 0)
    raise ReadError("not a PNG or JPEG image")
