"""Reading sealed files: the one reader the judge's tools and the viewer's previews share.

Text pages, DOCX and PDF text, XLSX workbooks and image headers here; tables with polars
in `assay.sealed.tables`. The office parsers (python-docx, pypdf, openpyxl) and polars come
with the `sealed` extra of `assay`. Each caller keeps its own way of bounding a parse in
time (the judge kills a process, the viewer abandons a thread).
"""

from ._readers import (
    DOCUMENT_SUFFIXES,
    IMAGE_SUFFIXES,
    MAX_UNPACKED_BYTES,
    TABLE_SUFFIXES,
    ImageInfo,
    ReadError,
    TextPage,
    check_unpacked,
    docx_parts,
    image_info,
    is_binary,
    open_workbook,
    pdf_pages,
    read_document,
    text_page,
)

__all__ = [
    "DOCUMENT_SUFFIXES",
    "IMAGE_SUFFIXES",
    "MAX_UNPACKED_BYTES",
    "TABLE_SUFFIXES",
    "ImageInfo",
    "ReadError",
    "TextPage",
    "check_unpacked",
    "docx_parts",
    "image_info",
    "is_binary",
    "open_workbook",
    "pdf_pages",
    "read_document",
    "text_page",
]
