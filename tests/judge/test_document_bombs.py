"""Document bombs: readers refuse containers that unpack too far, and parse off the loop."""

from __future__ import annotations

import asyncio
import io
import json
import time
import zipfile
from pathlib import Path

import pytest

from assay.providers import ToolCall
from assay.sealed import ReadError, read_document
from assay.sealed.tables import read_table
from assay.store import LocalBlobStore
from assay_judge.files import SealedFiles
from assay_judge.llm import tools
from assay_judge.llm.tools import JudgeToolBox, ToolLimits

from . import stalls
from .cases import put

pytestmark = pytest.mark.timeout(60)

_XML_MB = 100


def _bomb(inner: str) -> bytes:
    """A small zip (a few hundred KB) whose `inner` member unpacks to ~100 MB of XML."""
    paragraph = b"<w:p><w:r><w:t>aaaaaaaaaaaaaaaa</w:t></w:r></w:p>"
    body = paragraph * (_XML_MB * 1_000_000 // len(paragraph))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        archive.writestr(inner, b"<w:document><w:body>" + body + b"</w:body></w:document>")
    return buf.getvalue()


@pytest.fixture(scope="module")
def docx_bomb() -> bytes:
    return _bomb("word/document.xml")


def test_a_docx_bomb_is_refused_before_it_is_parsed(docx_bomb: bytes) -> None:
    assert len(docx_bomb) < 2_000_000
    started = time.monotonic()
    with pytest.raises(ReadError, match=r"unpacks to \d+ bytes, over the \d+ byte cap"):
        read_document(docx_bomb, "report.docx")
    assert time.monotonic() - started < 2.0


def test_an_xlsx_bomb_is_refused_before_it_is_parsed() -> None:
    started = time.monotonic()
    with pytest.raises(ReadError, match="unpacks to"):
        read_table(_bomb("xl/worksheets/sheet1.xml"), "counts.xlsx")
    assert time.monotonic() - started < 3.0


async def test_the_tool_answers_a_docx_bomb_with_an_error(docx_bomb: bytes, tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    box = JudgeToolBox(files=SealedFiles(files=[put(store, "r.docx", docx_bomb)], store=store))
    result = await box.run(ToolCall(id="c", name="read_document", arguments='{"path": "r.docx"}'))
    assert result.is_error and "over the" in result.text


async def test_a_slow_parse_times_out_without_blocking_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A CPU-bound parser: in a thread it would hold the GIL; in its process it is killed.
    monkeypatch.setattr(tools, "read_document", stalls.slow_document)
    store = LocalBlobStore(tmp_path / "blobs")
    box = JudgeToolBox(
        files=SealedFiles(files=[put(store, "p.pdf", b"%PDF-1.4")], store=store),
        limits=ToolLimits(parse_seconds=0.3),
    )
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    beat = asyncio.create_task(ticker())
    call = ToolCall(id="c", name="read_document", arguments=json.dumps({"path": "p.pdf"}))
    result = await box.run(call)
    beat.cancel()
    assert result.is_error and "took over 0.3 s to parse" in result.text
    assert ticks >= 5  # the event loop kept running while the parser was stuck
