"""Human review: who a human judge is on the log, and what makes a verdict a human's.

A human verdict is a `JudgmentRecorded` like any other (replayed, audited, counted by
the same decision), told apart by its `judge_kind`. Its judge id is the reviewer's
enrolled name, `reviewer-<name>`, and only that reviewer's enrolled key may sign it. It
is a reference the jury is measured against, never a juror: no jury score counts it.
"""

from __future__ import annotations

from typing import Literal

from ._ids import derive_id

__all__ = [
    "HUMAN_SAMPLE",
    "REVIEWER_PREFIX",
    "JudgeKind",
    "human_verdict_id",
    "is_reviewer_id",
    "reviewer_judge_id",
]

JudgeKind = Literal["machine", "human"]
"""machine: an LLM judge or the rule judge (a juror); human: a reviewer's reference verdict,
kept apart from every jury figure and used only to measure the jury."""

REVIEWER_PREFIX = "reviewer-"
"""Judge ids of human verdicts, and the `assay keys enroll` names of reviewers' keys."""

HUMAN_SAMPLE = 0
"""A reviewer grades a run once: the first verdict stands, as for every judge sample."""


def reviewer_judge_id(name: str) -> str:
    """The judge id of reviewer `name`'s verdicts (`reviewer-<name>`)."""
    return f"{REVIEWER_PREFIX}{name}"


def is_reviewer_id(judge_id: str) -> bool:
    """Whether `judge_id` names a reviewer (`reviewer-<name>`, the name not empty)."""
    return judge_id.startswith(REVIEWER_PREFIX) and len(judge_id) > len(REVIEWER_PREFIX)


def human_verdict_id(run_id: str, judge_id: str) -> str:
    """The event id of a reviewer's verdict on a run: one per (run, reviewer), so a form
    submitted twice or an import run twice is stored once."""
    return derive_id("human-verdict", run_id, judge_id, HUMAN_SAMPLE)
