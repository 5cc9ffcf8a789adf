"""DOCX and PDF previews as text, XLSX as a table, each within the judge readers' bounds."""

from __future__ import annotations

import time

import pytest

from assay_viewer import documents
from assay_viewer.previews import preview_file

from .conftest import SCRIPT
from .documents import docx_bytes, pdf_bytes, xlsx_bytes, zip_bomb


async def test_docx_is_shown_as_its_paragraphs_and_tables() -> None:
    data = docx_bytes("Findings", SCRIPT, table=[["gene", "fold"], ["BRCA1", "2.5"]])
    shown = await preview_file("out/report.docx", data)
    assert shown.kind == "text" and not shown.truncated
    assert shown.text.splitlines() == [
        "Findings",
        SCRIPT,
        "[table 1]",
        "gene | fold",
        "BRCA1 | 2.5",
    ]


async def test_pdf_is_shown_page_by_page() -> None:
    shown = await preview_file("paper.PDF", pdf_bytes("Abstract (draft)", "Methods"))
    assert shown.kind == "text"
    assert shown.text.splitlines() == ["[page 1]", "Abstract (draft)", "[page 2]", "Methods"]


async def test_xlsx_is_a_table_of_its_first_sheet_with_the_sheets_named() -> None:
    data = xlsx_bytes([["name", "value"], [SCRIPT, 1.5], ["empty", None]], sheets=("data", "raw"))
    shown = await preview_file("results.xlsx", data)
    assert shown.kind == "table" and not shown.truncated
    assert shown.rows == (["name", "value"], [SCRIPT, "1.5"], ["empty", ""])
    assert shown.note == "sheets: data, raw (showing 'data')"


async def test_long_sheets_and_documents_are_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = await preview_file("big.xlsx", xlsx_bytes([[i] for i in range(600)]))
    assert len(shown.rows) == documents.TABLE_ROWS and shown.truncated
    monkeypatch.setattr(documents, "TEXT_CHARS", 40)
    shown = await preview_file("long.docx", docx_bytes(*(f"paragraph {i}" for i in range(20))))
    assert len(shown.text) == 40 and shown.truncated


async def test_a_zip_bomb_is_refused_before_it_is_unpacked() -> None:
    bomb = zip_bomb()
    assert len(bomb) < 1_000_000
    for name in ("bomb.docx", "bomb.xlsx"):
        t0 = time.perf_counter()
        shown = await preview_file(name, bomb)
        assert time.perf_counter() - t0 < 2
        assert shown.kind == "unreadable" and "over the 64000000 byte cap" in shown.text


async def test_oversized_broken_and_slow_documents_are_not_previewed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = await preview_file("broken.pdf", b"%PDF-1.4 not really")
    assert broken.kind == "unreadable" and broken.text
    assert (await preview_file("notzip.docx", b"plain text")).kind == "unreadable"
    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 100)
    big = await preview_file("big.pdf", pdf_bytes("x" * 200))
    assert big.kind == "unreadable" and "over the 100 byte cap" in big.text
    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 10**9)
    monkeypatch.setattr(documents, "PARSE_SECONDS", 0.05)
    monkeypatch.setitem(documents._READERS, ".pdf", lambda data: time.sleep(1))
    slow = await preview_file("slow.pdf", pdf_bytes("x"))
    assert slow.kind == "unreadable" and slow.text == "took over 0.05 s to parse"
