"""`assay review import`: a reviewer's grades from CSV or JSONL, as signed human verdicts.

The same verdicts `assay view --review` publishes, for review done offline. The file is
checked whole before anything is published (all or nothing): every refused row is
listed with its line and the command exits non-zero, publishing none.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from assay.config import Settings
from assay_schemas import ID_PATTERN, reviewer_judge_id

from ._app import app, console, err_console, run_async
from ._home import home_settings

if TYPE_CHECKING:
    from assay_viewer.grading import Grade
    from assay_viewer.grading import GradeProblem as Problem

review_app = typer.Typer(
    help="Human review: a reviewer's grades become signed verdicts of a human judge, which "
    "measure the jury and never join it.",
    no_args_is_help=True,
)
app.add_typer(review_app, name="review")

REVIEW_HOME_HELP = (
    "A finished run directory (e.g. .assay/runs/<campaign>-<time>): its own log is served "
    "for this command and the verdicts are added to it (default: the running stack)."
)
MAX_SHOWN = 50
"""Refused rows listed one by one; the rest are counted."""


def check_reviewer(name: str) -> str:
    """The reviewer's judge id (`reviewer-<name>`), or a usage error for a bad name."""
    if not re.match(ID_PATTERN, name) or not re.match(ID_PATTERN, reviewer_judge_id(name)):
        raise typer.BadParameter(f"not a reviewer name: {name!r}", param_hint="--reviewer")
    return reviewer_judge_id(name)


@review_app.command("import")
def import_grades(
    file: Path = typer.Argument(
        ...,
        help="Grades: .csv (run_id, one column per rubric dimension, optional note) or "
        '.jsonl (one {"run_id", "scores": {dimension: 0-10}, "note"} per line).',
    ),
    reviewer: str = typer.Option(
        ..., "--reviewer", help="The enrolled reviewer (`assay keys enroll reviewer-NAME`)."
    ),
    home: Path = typer.Option(None, "--home", help=REVIEW_HOME_HELP),
) -> None:
    """Publish a file of grades as verdicts signed with the reviewer's enrolled key, after
    checking every row (all or nothing)."""
    from assay_viewer.grading import MAX_IMPORT_BYTES, parse_grades

    judge_id = check_reviewer(reviewer)
    fmt = file.suffix.lower().lstrip(".")
    if fmt not in ("csv", "jsonl"):
        raise typer.BadParameter(f"{file}: a .csv or .jsonl file", param_hint="FILE")
    try:
        size = file.stat().st_size
        if size > MAX_IMPORT_BYTES:
            err_console.print(
                f"[red]error:[/red] {file} is {size} bytes; at most {MAX_IMPORT_BYTES}"
            )
            raise typer.Exit(2)
        data = file.read_bytes()
    except OSError as e:
        err_console.print(f"[red]error:[/red] cannot read {file}: {e}")
        raise typer.Exit(2) from e
    grades, problems = parse_grades(data, fmt)
    with home_settings(home, writable=True) as settings:
        published = run_async(_publish(settings, judge_id, grades, problems))
    for line in published:
        console.print(line, highlight=False, soft_wrap=True)


async def _publish(
    settings: Settings, judge_id: str, grades: list[tuple[int, Grade]], problems: list[Problem]
) -> list[str]:
    from assay_viewer.grading import (
        GradeProblem,
        grade_problem,
        human_verdict,
        outcomes,
        publish_verdicts,
    )

    from ._report import _projections

    p = await _projections(settings, fresh=True)
    problems = problems + [
        GradeProblem(line, why)
        for line, grade in grades
        if (why := grade_problem(p, judge_id, grade)) is not None
    ]
    if problems:
        _refuse(sorted(problems))
    events = [human_verdict(p, judge_id, g, service=judge_id) for _, g in grades]
    sequences = await publish_verdicts(settings, judge_id, events)
    said = outcomes(await _projections(settings, fresh=True), sequences)
    refused = [o for o in said if not o.counted]
    for o in refused[:MAX_SHOWN]:
        err_console.print(f"refused seq {o.sequence}: {o.reason}", markup=False, soft_wrap=True)
    if refused:
        err_console.print(
            f"[red]error:[/red] {len(refused)} of {len(said)} published verdict(s) refused by "
            "the log (they count nowhere)"
        )
        raise typer.Exit(1)
    return [f"{len(said)} verdict(s) of {judge_id} published and counted"]


def _refuse(problems: list[Problem]) -> None:
    for problem in problems[:MAX_SHOWN]:
        err_console.print(f"refused {problem}", markup=False, highlight=False, soft_wrap=True)
    if len(problems) > MAX_SHOWN:
        err_console.print(f"… and {len(problems) - MAX_SHOWN} more refused row(s)")
    err_console.print(f"[red]error:[/red] {len(problems)} row(s) refused; nothing was published")
    raise typer.Exit(2)
