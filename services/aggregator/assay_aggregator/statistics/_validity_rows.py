"""Row models, input schemas, thresholds and definitions of the judge-validity statistics.

These measure the measuring instrument: how often a judge (or the jury's mean) gets
known-good and known-bad control runs right, how it agrees with human reviewers, and
what an agent's pass share becomes once corrected for those error rates. They are kept
apart from ``DEFINITIONS`` so the existing report's text does not change until the
report shows them.
"""

from __future__ import annotations

from typing import Literal

from ._rows import Row

__all__ = [
    "BINS",
    "CONTROLS_SCHEMA",
    "MIN_CONTROL_RUNS",
    "MIN_CONTROL_TASKS",
    "MIN_HUMAN_RUNS",
    "MIN_HUMAN_TASKS",
    "RATER_SCHEMA",
    "SCORED_RUNS_SCHEMA",
    "VALIDITY_DEFINITIONS",
    "ControlRate",
    "CorrectedPassShare",
    "HumanAgreement",
    "HumanBias",
]

CONTROLS_SCHEMA = {"task_id": "str", "run_id": "str", "judge_id": "str", "variant": "str",
                   "expected": "str", "score": "float"}  # fmt: skip
"""Control verdicts, one row per control run × judge: ``score`` is that judge's run score
(0-10), ``expected`` is "pass" (a known-good control) or "fail" (known-bad), ``variant``
names the control kind (e.g. "reference", "altered_numbers"); one variant, one expected."""
SCORED_RUNS_SCHEMA = {"task_id": "str", "run_id": "str", "agent_id": "str", "score": "float"}
"""An agent's scored runs, one row per run: ``score`` is the run score (0-10) of the judge
(or the jury's mean) whose error rates correct the pass share."""
RATER_SCHEMA = {"task_id": "str", "run_id": "str", "rater_id": "str", "dimension": "str",
                "score": "float"}  # fmt: skip
"""Ratings of one kind of rater (LLM judges, or humans), one row per run × rater ×
dimension (× sample: repeated rows are averaged)."""

BINS = 11
"""Quadratic-weighted κ compares run scores binned to the integers 0-10 (half up)."""
MIN_CONTROL_RUNS = 10
"""Below this many control runs a sensitivity or specificity is too uncertain to use."""
MIN_CONTROL_TASKS = 5
"""Below this many tasks with controls the task bootstrap of Se/Sp is not trustworthy."""
MIN_HUMAN_RUNS = 20
"""Below this many runs graded by both sides, agreement with humans is too uncertain."""
MIN_HUMAN_TASKS = 5
"""Below this many tasks with paired verdicts the task bootstrap is not trustworthy."""

Measure = Literal["sensitivity", "specificity"]
SubjectKind = Literal["judge", "jury", "humans"]


class ControlRate(Row):
    """A judge's sensitivity or specificity on control runs, at the anchor."""

    judge_id: str | None
    """The judge, or None for the jury's mean run score."""
    variant: str | None
    """The control variant, or None for all controls of the measure's class."""
    measure: Measure
    """'sensitivity' (known-good passed) or 'specificity' (known-bad failed)."""
    estimate: float
    """Share of the controls judged right (pooled over runs); NaN without controls."""
    n_tasks: int
    n_runs: int
    n_right: int
    """Controls judged right: known-good at or above the anchor, known-bad below it."""
    se: float
    """Cluster-robust (CR1) standard error over tasks."""
    ci_low: float
    """Lower bound of the percentile bootstrap interval (tasks resampled)."""
    ci_high: float
    """Upper bound of the percentile bootstrap interval."""


class CorrectedPassShare(Row):
    """An agent's pass share corrected for the judge's error rates (Rogan–Gladen)."""

    agent_id: str
    judge_id: str | None
    """The judge whose scores and error rates are used, or None for the jury's mean."""
    raw_share: float
    """Mean over tasks of the share of the task's runs at or above the anchor (q)."""
    raw_ci_low: float
    raw_ci_high: float
    sensitivity: float
    specificity: float
    unclipped: float
    """(q + Sp − 1)/(Se + Sp − 1) before clipping; NaN when Se + Sp ≤ 1."""
    estimate: float
    """The corrected share, clipped to [0, 1]."""
    ci_low: float
    """Percentile interval from one joint bootstrap of tasks (runs and controls together)."""
    ci_high: float
    n_tasks: int
    n_runs: int
    undefined_resamples: int
    """Resamples where Se* + Sp* ≤ 1, left out of the interval."""


class HumanAgreement(Row):
    """Agreement of a judge, the jury's mean, or a second human with human verdicts."""

    subject_kind: SubjectKind
    """'judge', 'jury' (mean run score over judges) or 'humans' (human against human)."""
    subject: str
    """The judge id; '' for the jury and for human-human rows."""
    n_tasks: int
    n_runs: int
    """Verdict pairs (run × human, or run × pair of humans)."""
    kappa: float
    """Cohen's κ on pass/fail at the anchor; NaN when only one class occurs."""
    kappa_low: float
    kappa_high: float
    weighted_kappa: float
    """Quadratic-weighted Cohen's κ on run scores binned to the integers 0-10."""
    weighted_kappa_low: float
    weighted_kappa_high: float
    spearman: float
    """Spearman's rank correlation of the run scores (midranks for ties)."""
    spearman_low: float
    spearman_high: float
    both_pass: int
    """Confusion matrix: subject passes and human passes."""
    subject_only_pass: int
    """Subject passes, human fails (a false pass when the human is right)."""
    human_only_pass: int
    """Subject fails, human passes (a false fail)."""
    both_fail: int


class HumanBias(Row):
    """Mean difference subject − human of scores, on one dimension or on the run score."""

    subject_kind: SubjectKind
    subject: str
    dimension: str | None
    """Dimension key, or None for the run score (mean of all ratings)."""
    n_runs: int
    """Verdict pairs behind the figure."""
    n_tasks: int
    estimate: float
    """Mean over verdict pairs of subject score − human score (first − second for humans)."""
    se: float
    """Cluster-robust (CR1) standard error over tasks."""
    ci_low: float
    ci_high: float


VALIDITY_DEFINITIONS: dict[str, str] = {
    "control_rates": (
        "Sensitivity Se = share of known-good control runs whose run score is at or above "
        "the anchor; specificity Sp = share of known-bad control runs below it; pooled over "
        "runs, per judge and for the jury's mean run score, overall and per variant. "
        "Intervals: percentile bootstrap resampling tasks (clusters), seeded."
    ),
    "corrected_pass_shares": (
        "Rogan–Gladen: p = (q + Sp − 1)/(Se + Sp − 1) clipped to [0, 1], q the raw pass "
        "share (mean over tasks of the task's share of runs at or above the anchor); "
        "undefined when Se + Sp ≤ 1. One bootstrap resamples the union of the runs' and the "
        "controls' tasks, so q, Se and Sp vary together; resamples with Se* + Sp* ≤ 1 are "
        "left out of the interval."
    ),
    "human_agreement": (
        "Each judge's (and the jury's mean) run score paired with each human's run score of "
        "the same run; human-human pairs are every two humans who graded the same run. "
        "Cohen's κ on pass/fail at the anchor; quadratic-weighted κ on scores binned to the "
        "integers 0-10 (half up), weights (i−j)²/100; Spearman's ρ on the run scores; "
        "intervals from a task bootstrap (duplicated tasks keep all their pairs)."
    ),
    "human_bias": (
        "Mean over verdict pairs of the subject's minus the human's score, per dimension "
        "and for the run score; interval and CR1 standard error over tasks."
    ),
    "validity_warnings": (
        f"few_controls: fewer than {MIN_CONTROL_RUNS} control runs or {MIN_CONTROL_TASKS} "
        f"tasks behind a Se/Sp; few_human_verdicts: fewer than {MIN_HUMAN_RUNS} verdict pairs "
        f"or {MIN_HUMAN_TASKS} tasks; kappa_undefined: one class only; "
        "correction_undefined: Se + Sp ≤ 1 or a class without controls; "
        "correction_clipped: the corrected share fell outside [0, 1]; "
        "correction_resamples_undefined: resamples left out of the corrected interval."
    ),
}
