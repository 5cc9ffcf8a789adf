"""`assay review import`: hostile files refused whole with the line named, genuine ones
published as signed human verdicts that replay, audit and the snapshot treat like any other."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay_aggregator.service import build
from assay_viewer.grading import MAX_IMPORT_BYTES, MAX_NOTE_CHARS, parse_grades
from tests.aggregator.conftest import run_cli

from .conftest import Signed, enroll, foreign_reviewer, projections, rubric_scores


def _csv(dims: list[str], rows: list[list[object]]) -> str:
    table: list[list[object]] = [["run_id", *dims, "note"], *rows]
    return "\n".join(",".join(str(c) for c in r) for r in table) + "\n"


async def _import(
    settings: Settings, tmp: Path, name: str, text: str | bytes, reviewer: str = "alice"
) -> subprocess.CompletedProcess[str]:
    path = tmp / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return await asyncio.to_thread(
        run_cli, ["review", "import", str(path), "--reviewer", reviewer], settings, tmp
    )


def test_parsing_refuses_each_malformed_row_by_its_line() -> None:
    rows = [
        '{"run_id": "r1", "scores": {"accuracy": 7}}',
        '{"run_id": "r2", "scores": {"accuracy": 11}}',
        '{"run_id": "r3", "scores": {"accuracy": 7.5}}',
        '{"run_id": "r4", "scores": {"accuracy": true}}',
        '{"run_id": "bad id!", "scores": {"accuracy": 7}}',
        "not json",
        '{"run_id": "r5", "scores": {}}',
        '{"run_id": "r6", "scores": {"accuracy": 1}, "extra": 1}',
        '{"run_id": "r1", "scores": {"accuracy": 2}}',
        "[" * 100_000,
        json.dumps({"run_id": "r7", "scores": {"a": 1}, "note": "x" * (MAX_NOTE_CHARS + 1)}),
        '{"run_id": "r8", "scores": {"accuracy": -1}}',
    ]
    grades, problems = parse_grades("\n".join(rows).encode(), "jsonl")
    assert [line for line, _ in grades] == [1]
    assert [p.line for p in problems] == list(range(2, 13))
    said = {p.line: p.message for p in problems}
    assert "less than or equal to 10" in said[2] and "valid integer" in said[3]
    assert "first on line 1" in said[9]
    assert "longer than" in said[10] and "not JSON" in said[6]


def test_csv_cells_are_integers_or_refused() -> None:
    text = _csv(
        ["accuracy", "clarity"],
        [
            ["r1", 7, 8, "fine"],
            ["r2", "7.0", 8, ""],
            ["r3", 7, 8, "a", "b"],
            ["r4", " 9", "10", ""],
        ],
    )
    grades, problems = parse_grades(text.encode(), "csv")
    assert [(line, g.run_id) for line, g in grades] == [(2, "r1"), (5, "r4")]
    assert grades[1][1].scores == {"accuracy": 9, "clarity": 10}
    assert [(p.line, "more cells" in p.message) for p in problems] == [(3, False), (4, True)]
    _, bad_header = parse_grades(b"run,accuracy\nr1,7\n", "csv")
    assert "run_id column" in str(bad_header[0])


def test_an_oversized_file_is_refused_before_it_is_parsed() -> None:
    grades, problems = parse_grades(b"x" * (MAX_IMPORT_BYTES + 1), "jsonl")
    assert grades == [] and "at most" in problems[0].message


async def test_a_file_with_one_bad_row_publishes_nothing(
    bus: Bus, settings: Settings, signed: Signed, tmp_path: Path
) -> None:
    p = await projections(bus, settings)
    enroll(settings, "alice")
    dims = sorted(rubric_scores(p, 7))
    good = [[r, *[7] * len(dims), "ok"] for r in signed.sealed[:3]]
    text = _csv(
        dims,
        [
            *good,
            ["nosuchrun", *[7] * len(dims), ""],
            [signed.sealed[4], *[7] * (len(dims) - 1), ""],
        ],
    )
    head = p.state.last_sequence
    out = await _import(settings, tmp_path, "grades.csv", text)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "line 5: run nosuchrun is not a sealed run" in out.stderr
    assert "line 6:" in out.stderr and "unscored" in out.stderr
    assert "nothing was published" in out.stderr
    assert (await projections(bus, settings)).state.last_sequence == head
    big = await _import(settings, tmp_path, "big.jsonl", b"{}\n" * (MAX_IMPORT_BYTES // 3 + 1))
    assert big.returncode == 2 and "at most" in big.stderr


async def test_unenrolled_and_foreign_reviewers_publish_nothing_that_counts(
    bus: Bus, settings: Settings, signed: Signed, tmp_path: Path
) -> None:
    p = await projections(bus, settings)
    line = json.dumps({"run_id": signed.sealed[0], "scores": rubric_scores(p, 6)})
    nobody = await _import(settings, tmp_path, "g.jsonl", line, reviewer="nobody")
    assert nobody.returncode == 2 and "assay keys enroll reviewer-nobody" in nobody.stderr
    assert f"reviewer-nobody --home {settings.home}`" in "".join(nobody.stderr.split("\n"))
    foreign_reviewer(settings, tmp_path, "mallory")
    foreign = await _import(settings, tmp_path, "g.jsonl", line, reviewer="mallory")
    assert foreign.returncode == 1, foreign.stdout + foreign.stderr
    assert "enrollment not signed by the operator" in foreign.stderr
    assert (await projections(bus, settings)).state.human_verdicts == {}


async def test_imported_verdicts_are_signed_replayed_and_audited(
    bus: Bus, settings: Settings, signed: Signed, tmp_path: Path
) -> None:
    p = await projections(bus, settings)
    enroll(settings, "alice")
    rows = [
        json.dumps({"run_id": r, "scores": rubric_scores(p, 8), "note": "<b>ok</b>"})
        for r in signed.sealed[:4]
    ]
    out = await _import(settings, tmp_path, "grades.jsonl", "\n".join(rows))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "4 verdict(s) of reviewer-alice published and counted" in out.stdout
    again = await _import(settings, tmp_path, "grades.jsonl", "\n".join(rows))
    assert again.returncode == 2 and "already graded by reviewer-alice" in again.stderr
    after = await projections(bus, settings)
    assert len(after.state.human_verdicts) == 4 and after.state.refused == {}
    service = build(settings, n_resamples=200)
    service.flush_interval_s = 0.2
    await service.start()
    try:
        await service.wait_for(after.state.last_sequence, timeout=30)
        assert len(service.state.human_verdicts) == 4
    finally:
        await service.stop()
    verify = await asyncio.to_thread(run_cli, ["replay", "--verify"], settings, tmp_path)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "differs" not in verify.stdout
    audit = await asyncio.to_thread(run_cli, ["audit", signed.sealed[0]], settings, tmp_path)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "reviewer/alice" in audit.stdout and "REFUSED" not in audit.stdout


@pytest.mark.parametrize("name", ["grades.txt", "grades"])
async def test_an_unknown_format_is_a_usage_error(
    settings: Settings, tmp_path: Path, name: str
) -> None:
    out = await _import(settings, tmp_path, name, "run_id\n")
    assert out.returncode == 2 and ".csv or .jsonl" in out.stderr


async def test_view_review_needs_an_enrolled_reviewer(
    settings: Settings, signed: Signed, tmp_path: Path
) -> None:
    alone = await asyncio.to_thread(run_cli, ["view", "--review"], settings, tmp_path)
    assert alone.returncode == 2 and "go together" in alone.stderr
    nobody = await asyncio.to_thread(
        run_cli, ["view", "--review", "--reviewer", "nobody", "--port", "0"], settings, tmp_path
    )
    assert nobody.returncode == 2, nobody.stdout + nobody.stderr
    assert "assay keys enroll reviewer-nobody" in nobody.stderr
    assert f"reviewer-nobody --home {settings.home}`" in "".join(nobody.stderr.split("\n"))
    enrolled = await asyncio.to_thread(
        run_cli, ["keys", "enroll", "reviewer-carol"], settings, tmp_path
    )
    assert enrolled.returncode == 0, enrolled.stderr
    assert (settings.home / "keys" / "reviewer-carol.enrollment").exists()
