"""A reviewer's grades: read from a form or a file, checked, and made signed human verdicts.

Every grade is hostile input until checked: a file is bounded in bytes, rows and line
length before it is parsed; each row is validated on its own and its error names its
line; a grade must score exactly the run's rubric dimensions, integers 0-10, on a sealed
run the reviewer has not graded. The verdict it becomes is published over a bus that
signs as ``reviewer-<name>`` (the reviewer's enrolled key), and it counts only if the
aggregator's counting rule (`counting.counts`) counts it: :func:`outcomes` reads that back.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Annotated, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assay.bus import Bus
from assay.config import Settings
from assay_aggregator.counting import rubric_keys
from assay_report.projections import Projections
from assay_schemas import (
    HUMAN_SAMPLE,
    ConfigError,
    DimensionScore,
    Identifier,
    JudgmentRecorded,
    Producer,
    human_verdict_id,
)

from .contract import check_publishes, reviewer_signer

__all__ = [
    "MAX_IMPORT_BYTES",
    "MAX_IMPORT_ROWS",
    "MAX_NOTE_CHARS",
    "Grade",
    "GradeProblem",
    "HumanRow",
    "Outcome",
    "ReviewerNotEnrolled",
    "grade_problem",
    "human_verdict",
    "human_verdicts_csv",
    "outcomes",
    "parse_grades",
    "publish_verdicts",
    "require_enrolled",
    "spreadsheet_cell",
]

MAX_IMPORT_BYTES = 2 * 1024 * 1024
"""A grades file larger than this is refused before it is read (thousands of rows fit)."""
MAX_IMPORT_ROWS = 10_000
MAX_LINE_BYTES = 64 * 1024
"""A JSONL line longer than this is refused before it is parsed."""
MAX_NOTE_CHARS = 4_000
MAX_DIMENSIONS = 64

Score = Annotated[int, Field(strict=True, ge=0, le=10)]


class Grade(BaseModel):
    """One reviewer's grade of one run: an integer 0-10 per rubric dimension, a note."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: Identifier
    scores: dict[Identifier, Score] = Field(min_length=1, max_length=MAX_DIMENSIONS)
    note: str = Field(default="", max_length=MAX_NOTE_CHARS)


class GradeProblem(NamedTuple):
    """Why one row (its 1-based line) is refused."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def _validation(e: ValidationError) -> str:
    first = e.errors()[0]
    where = ".".join(str(x) for x in first["loc"]) or "row"
    return f"{where}: {first['msg']}" + (
        f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    )


def _csv_rows(text: str) -> list[tuple[int, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    fields = reader.fieldnames or []
    if "run_id" not in fields:
        raise ValueError("line 1: the CSV header must name a run_id column")
    if len(fields) != len(set(fields)):
        raise ValueError("line 1: the CSV header repeats a column")
    rows: list[tuple[int, Any]] = []
    for row in reader:
        if None in row:
            rows.append((reader.line_num, "more cells than the header names"))
            continue
        scores: dict[str, Any] = {}
        for key, cell in row.items():
            if key in ("run_id", "note") or cell is None or cell == "":
                continue
            scores[key] = int(cell) if cell.strip().isdigit() and len(cell) <= 3 else cell
        rows.append(
            (
                reader.line_num,
                {"run_id": row["run_id"], "scores": scores, "note": row.get("note") or ""},
            )
        )
    return rows


def _jsonl_rows(text: str) -> list[tuple[int, Any]]:
    rows: list[tuple[int, Any]] = []
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            rows.append((n, f"longer than {MAX_LINE_BYTES} characters"))
            continue
        try:
            rows.append((n, json.loads(line)))
        except (ValueError, RecursionError) as e:
            rows.append((n, f"not JSON: {str(e)[:200]}"))
    return rows


def parse_grades(data: bytes, fmt: str) -> tuple[list[tuple[int, Grade]], list[GradeProblem]]:
    """Grades of a CSV (header: run_id, one column per dimension, optional note) or JSONL
    file (``{"run_id", "scores": {dim: int}, "note"}`` per line), each with its line; and
    every row's problem. Bounds are checked before anything is parsed."""
    if len(data) > MAX_IMPORT_BYTES:
        return [], [GradeProblem(0, f"the file is {len(data)} bytes; at most {MAX_IMPORT_BYTES}")]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        return [], [GradeProblem(text_line(data, e.start), "not UTF-8 text")]
    try:
        raw = _csv_rows(text) if fmt == "csv" else _jsonl_rows(text)
    except (ValueError, csv.Error) as e:
        return [], [GradeProblem(0, str(e))]
    if len(raw) > MAX_IMPORT_ROWS:
        return [], [GradeProblem(0, f"{len(raw)} rows; at most {MAX_IMPORT_ROWS} per file")]
    grades: list[tuple[int, Grade]] = []
    problems: list[GradeProblem] = []
    seen: dict[str, int] = {}
    for line, row in raw:
        if isinstance(row, str):
            problems.append(GradeProblem(line, row))
            continue
        try:
            grade = Grade.model_validate(row)
        except ValidationError as e:
            problems.append(GradeProblem(line, _validation(e)))
            continue
        if grade.run_id in seen:
            problems.append(
                GradeProblem(
                    line, f"run {grade.run_id} is graded again (first on line {seen[grade.run_id]})"
                )
            )
            continue
        seen[grade.run_id] = line
        grades.append((line, grade))
    return grades, problems


def text_line(data: bytes, offset: int) -> int:
    """The 1-based line of byte `offset`."""
    return data.count(b"\n", 0, offset) + 1


def grade_problem(p: Projections, reviewer: str, grade: Grade) -> str | None:
    """Why the log would refuse `reviewer`'s (a judge id) grade, checked before it is
    published: an unknown or unsealed run, dimensions off the rubric, a second grade."""
    run = p.state.runs.get(grade.run_id)
    if run is None or not run.sealed:
        return f"run {grade.run_id} is not a sealed run on this log"
    keys = rubric_keys(p.state, run.campaign_id, run.task_id)
    if keys is not None and set(grade.scores) != keys:
        extra, missing = sorted(set(grade.scores) - keys), sorted(keys - set(grade.scores))
        said = [f"not in the rubric: {', '.join(extra)}"] if extra else []
        said += [f"unscored: {', '.join(missing)}"] if missing else []
        return f"run {grade.run_id}: dimensions {'; '.join(said)} (the rubric: {', '.join(sorted(keys))})"
    if f"{grade.run_id}/{reviewer}/{HUMAN_SAMPLE}" in p.state.human_verdicts:
        return f"run {grade.run_id} was already graded by {reviewer} (the first grade stands)"
    return None


def human_verdict(p: Projections, reviewer: str, grade: Grade, *, service: str) -> JudgmentRecorded:
    """The human verdict `reviewer` (a judge id) gives with `grade` (checked first)."""
    run = p.state.runs[grade.run_id]
    rubric = p.state.campaigns.get(run.campaign_id, {}).get("rubric", {})
    return JudgmentRecorded(
        event_id=human_verdict_id(grade.run_id, reviewer),
        campaign_id=run.campaign_id,
        run_id=grade.run_id,
        task_id=run.task_id or None,
        judge_id=reviewer,
        judge_kind="human",
        judge_family="human",
        sample=HUMAN_SAMPLE,
        rubric_id=str(rubric.get("rubric_id", "")),
        rubric_version=int(rubric.get("version", 0)),
        scores={k: DimensionScore(score=v) for k, v in sorted(grade.scores.items())},
        rationale=grade.note,
        producer=Producer(service=service, version="0.1.0"),
    )


class ReviewerNotEnrolled(ConfigError):
    """A reviewer whose key this home never enrolled: refused before anything is read."""


def require_enrolled(settings: Settings, reviewer: str) -> None:
    """Refuse `reviewer` (a judge id) without an enrolled key in this home, naming the
    command that enrols one here: a desk or an import rarely runs on the default home.
    A key that is there but broken is `signer_for`'s own ConfigError, later."""
    keys = settings.home / "keys"
    if not all((keys / f"{reviewer}{suffix}").exists() for suffix in (".seed", ".enrollment")):
        raise ReviewerNotEnrolled(
            f"reviewer {reviewer.removeprefix('reviewer-')!r} has no enrolled key in {keys}: "
            f"the operator enrolls it with `assay keys enroll {reviewer} --home {settings.home}`"
        )


async def publish_verdicts(
    settings: Settings, reviewer: str, events: Sequence[JudgmentRecorded]
) -> list[int]:
    """Publish `events` signed with `reviewer`'s enrolled key (a `ConfigError` when it has
    none); return their stream sequences. The viewer's contract says what it may publish,
    and as whom: the reviewer, never the aggregator."""
    check_publishes(events)
    require_enrolled(settings, reviewer)
    async with Bus(settings, service=reviewer_signer(reviewer)) as bus:
        return [(await bus.publish(e)).sequence for e in events]


class Outcome(NamedTuple):
    """What the log made of one published verdict."""

    sequence: int
    counted: bool
    reason: str


def outcomes(p: Projections, sequences: Sequence[int]) -> list[Outcome]:
    """Whether the counting rule counted each published verdict (the projections caught up)."""
    out = []
    for seq in sequences:
        refused = p.state.refused.get(seq)
        out.append(Outcome(seq, refused is None, refused.reason if refused else ""))
    return out


FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection")."""


def spreadsheet_cell(text: str) -> str:
    """`text` as a cell no spreadsheet runs: one leading formula character is made text
    by a `'` before it (OWASP's advice); the stored note stays as the reviewer wrote it."""
    return "'" + text if text.startswith(FORMULA_LEADS) else text


class HumanRow(NamedTuple):
    """One reviewer's verdict on one run, as the export writes it."""

    reviewer: str
    run_id: str
    task_id: str
    scores: dict[str, int]
    note: str


def human_verdicts_csv(rows: Sequence[HumanRow]) -> bytes:
    """Human verdicts as CSV: reviewer, run, task, one column per dimension, the note.
    Every text cell is neutralised (`spreadsheet_cell`); the scores are integers."""
    dims = sorted({d for r in rows for d in r.scores})
    out = io.StringIO(newline="")
    writer = csv.writer(out, quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")
    writer.writerow(["reviewer", "run_id", "task_id", *dims, "note"])
    for r in rows:
        text = [spreadsheet_cell(v) for v in (r.reviewer, r.run_id, r.task_id)]
        writer.writerow([*text, *(r.scores.get(d, "") for d in dims), spreadsheet_cell(r.note)])
    return out.getvalue().encode()
