"""The judge's read-only tools and verdict validation, without a bus or a model."""

from __future__ import annotations

import io
import json
import struct
import zlib

import docx
import openpyxl
import pytest

from assay.providers import ImagePart, TextPart, ToolCall
from assay.sealed.tables import read_table
from assay.store import LocalBlobStore
from assay_judge.files import SealedFiles
from assay_judge.llm.tools import JudgeToolBox
from assay_judge.llm.verdict import check_verdict
from assay_schemas import BlobCorrupted

from .cases import RUBRIC, put, verdict

pytestmark = pytest.mark.timeout(30)


def _png(width: int = 3, height: int = 2) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _pdf(text: str) -> bytes:
    """A one-page PDF with one line of text, offsets computed so pypdf reads it cleanly."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _xlsx() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "counts"
    sheet.append(["gene", "count"])
    for i in range(20):
        sheet.append([f"g{i}", i * 10])
    book.create_sheet("notes").append(["free text"])
    buf = io.BytesIO()
    book.save(buf)
    return buf.getvalue()


def _docx() -> bytes:
    document = docx.Document()
    document.add_paragraph("Methods: Welch t-test on OD600.")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "p", "0.003"
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


@pytest.fixture
def files(tmp_path) -> SealedFiles:
    store = LocalBlobStore(tmp_path / "blobs")
    long_text = "\n".join(f"line {i}" for i in range(1000)).encode()
    refs = [
        put(store, "log.txt", long_text),
        put(store, "counts.xlsx", _xlsx()),
        put(store, "report.docx", _docx()),
        put(store, "paper.pdf", _pdf("Fold change 2.4")),
        put(store, "fig.png", _png()),
        put(store, "data.bin", b"\x00\x01\x02" * 100),
        put(store, "a.tsv", b"x\ty\n1\t2\n3\t4\n"),
    ]
    return SealedFiles(files=refs, store=store)


async def _call(
    box: JudgeToolBox, name: str, **args: object
) -> tuple[str, tuple[TextPart | ImagePart, ...], bool]:
    result = await box.run(ToolCall(id="c", name=name, arguments=json.dumps(args)))
    return result.text, result.content, result.is_error


async def test_text_is_paged_and_binary_refused(files: SealedFiles) -> None:
    box = JudgeToolBox(files=files)
    text, _, error = await _call(box, "read_file", path="log.txt", offset=10, limit=3)
    assert (
        not error
        and "line 10\nline 11\nline 12\n</artifact>" in text
        and 'lines="10-13 of 1000"' in text
    )
    assert "offset=13" in text
    text, _, error = await _call(box, "read_file", path="data.bin")
    assert error and "binary file" in text
    text, _, error = await _call(box, "read_file", path="missing.txt")
    assert error and "no file 'missing.txt'" in text
    assert files.opened == ["log.txt", "data.bin"]


async def test_tables_documents_and_sheets(files: SealedFiles) -> None:
    box = JudgeToolBox(files=files)
    text, _, error = await _call(box, "read_table", path="counts.xlsx", head=3)
    assert not error and "shape: 20 rows x 2 columns" in text and "sheets: counts, notes" in text
    assert "count: Int64" in text and "g2" in text and "summary:" in text
    text, _, _ = await _call(box, "read_table", path="counts.xlsx", sheet="nope")
    assert "no sheet 'nope'" in text
    text, _, error = await _call(box, "read_table", path="a.tsv")
    assert not error and "shape: 2 rows x 2 columns" in text
    text, _, error = await _call(box, "read_document", path="report.docx")
    assert not error and "Welch t-test" in text and "p | 0.003" in text
    text, _, error = await _call(box, "read_document", path="paper.pdf")
    assert not error and "Fold change 2.4" in text and "[page 1]" in text


async def test_images_for_multimodal_judges_and_a_text_fallback(files: SealedFiles) -> None:
    _, content, error = await _call(JudgeToolBox(files=files), "view_image", path="fig.png")
    assert not error and isinstance(content[1], ImagePart) and content[1].media_type == "image/png"
    assert "image/png, 3x2 px" in content[0].text
    text, content, error = await _call(
        JudgeToolBox(files=files, multimodal=False), "view_image", path="fig.png"
    )
    assert not error and len(content) == 1 and "cannot see images" in text
    text, _, error = await _call(JudgeToolBox(files=files), "view_image", path="log.txt")
    assert error and "not a PNG or JPEG" in text


async def test_corrupted_blob_is_refused(files: SealedFiles) -> None:
    store = files.store
    assert isinstance(store, LocalBlobStore)
    ref = files.ref("a.tsv")
    path = store.path_of(ref.sha256)
    path.chmod(0o644)
    path.write_bytes(b"x\ty\n9\t9\n")
    text, _, error = await _call(JudgeToolBox(files=files), "read_table", path="a.tsv")
    assert error and ref.sha256[:12] in text
    with pytest.raises(BlobCorrupted):
        store.get_bytes(ref.sha256)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ("not json", "not valid JSON"),
        (json.dumps({"scores": {}}), "rationale: Field required"),
        (json.dumps(verdict(tags=["made_up"])), "unknown failure tags made_up"),
        (
            json.dumps(
                verdict(scores={**verdict()["scores"], "style": {"score": 3, "reason": "x"}})
            ),
            "unknown dimensions: style",
        ),
        (
            json.dumps(
                verdict(
                    scores={**verdict()["scores"], "completeness": {"score": 7.5, "reason": "x"}}
                )
            ),
            "scores.completeness.score",
        ),
        (
            json.dumps(
                verdict(
                    scores={**verdict()["scores"], "completeness": {"score": -1, "reason": "x"}}
                )
            ),
            "greater than or equal to 0",
        ),
        (
            json.dumps(
                verdict(scores={**verdict()["scores"], "completeness": {"score": 5, "reason": ""}})
            ),
            "scores.completeness.reason",
        ),
    ],
)
def test_invalid_verdicts_name_their_problem(arguments: str, problem: str) -> None:
    check = check_verdict(arguments, RUBRIC, {"out.csv"})
    assert check.verdict is None and any(problem in p for p in check.problems), check.problems


def test_valid_verdict_is_normalised() -> None:
    args = verdict(9, tags=["overclaiming", "overclaiming"], files=["out.csv"])
    args["scores"]["communication"]["reason"] = "clear\nbut   long"
    check = check_verdict(json.dumps(args), RUBRIC, {"out.csv"})
    assert check.problems == [] and check.verdict is not None
    assert check.verdict.failure_tags == ["overclaiming"]
    assert check.verdict.scores["communication"].reason == "clear but long"
    assert list(check.verdict.scores) == RUBRIC.dimension_keys


@pytest.mark.parametrize(
    "header", ["statistic,value", "statistic,statistic_,value", "value,statistic"]
)
def test_a_table_with_a_statistic_column_is_summarised(header: str) -> None:
    # polars' describe() labels its rows in a column named "statistic": a results table
    # with that column (statistic,value is a common layout) failed the judge's read_table,
    # and with it every judgment of the run.
    width = header.count(",") + 1
    rows = "".join(",".join(["mean"] + ["1.5"] * (width - 1)) + "\n" for _ in range(2))
    text = read_table((header + "\n" + rows).encode(), "results/summary.csv")
    assert f"shape: 2 rows x {width} columns" in text and "summary:" in text
    assert "statistic_" in text.split("summary:")[1]
